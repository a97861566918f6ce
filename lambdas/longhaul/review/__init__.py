"""Human review: the review step's lane (open, wait on a task token, escalate, apply the decision) and the reviewer
API's use cases."""
