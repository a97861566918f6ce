"""Adapters of the ports (`longhaul.ports`) to AWS services."""
