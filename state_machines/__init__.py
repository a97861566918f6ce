"""State machines: a small builder that owns the house step policy, and one module per workflow type."""
