"""The API's use cases: submission, job status, events, results, cancellation, uploads (`jobs`) and the reviewers'
routes (`reviews`). Handlers call these; these call everything below.

May import: every other part."""
