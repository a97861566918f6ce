"""Evals: each workflow's datasets with expected outcomes, run through the local platform (`python -m evals`, `make
eval`), scored per workflow and gated against a committed baseline (`evals/run.py`)."""
