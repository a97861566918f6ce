"""The API's use cases: submission, job status, events, results, cancellation, uploads, a document's page (`jobs`),
a job's workflow as a graph of its state machine's states (`graph`) and the reviewers' routes (`reviews`). Handlers
call these; these call everything below.

May import: every other part."""
