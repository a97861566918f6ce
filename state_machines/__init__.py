"""State machines: a small builder that owns the house step policy and derives each workflow's chain from its spec
(`parts.py` the policy's parts, `maps.py` fan-outs, `review_lane.py` the review step, `builder.py` the walk over the
spec). A workflow has a module here only for what its spec cannot say (a branch, a parallel block)."""
