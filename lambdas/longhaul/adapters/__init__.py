"""Adapters of the ports (`longhaul.core.ports`) to AWS services."""
