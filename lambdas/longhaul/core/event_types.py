"""What each event type of a job's log means: one line each, the manual's events reference renders them.

Every event type the code appends (`JobStore.append_event`, `JobStore.transition`, `NewEvent`, the model gateway's
events) must be described here: `tests/docs/test_reference.py` scans the code's writing sites and fails on one that
is missing (or on one described here that nothing writes any more).
"""

from __future__ import annotations

EVENT_TYPES: dict[str, str] = {
    # The job's statuses (each of these records a status change).
    "job_queued": "The job was accepted and waits to start (its first event).",
    "job_started": "The job's first step started: the job is running.",
    "job_resumed": "The job runs again: a step started after a retry wait, or a paused job was resumed (its `detail` "
    "says who and for how long it was paused).",
    "pause_requested": "Someone asked to pause the job: it stops at its next step boundary.",
    "job_paused": "The job stopped at a step boundary on a pause request (`detail`: `step`, `requested_by`); its "
    "execution waits with no compute held.",
    "pause_withdrawn": "A resume came before the pause was reached: the request was withdrawn, the job runs on.",
    "job_running": "A step started while the job was in another status (after a review): the job is running.",
    "job_retrying": "A step's attempt failed with a retryable error; the job waits for the next attempt.",
    "job_completed": "The last step finished: the result is ready.",
    "job_failed": "A step failed for good (or the execution ended without recording why): the job failed.",
    "job_expired": "The job's deadline (or its review's) passed before it finished.",
    "cancel_requested": "Someone asked to cancel the job; its execution is being stopped.",
    "job_cancelled": "The job stopped on a cancellation, keeping its completed steps (and saying their side effects).",
    "job_updated": "The job was updated while it had not finished: `detail.fields` names what changed (deadline, "
    "budget, sla_class, review, instructions, agent), `detail.requested_by` who asked (`tenant` or `operator`).",
    "job_superseded": "A later submission of the tenant replaced this job (`detail.by`); one that had not finished is "
    "then cancelled with reason `superseded`.",
    "job_replayed": "An operator replayed the job from a step: a new attempt, queued.",
    "input_fixed": "An operator fixed the job's input (`detail`: `by`, `reason`, `version`, `changed`, `diff`, "
    "`invalidated_steps`): a new version of the input, the earlier kept; the next replay reads it.",
    "job_escalated": "An operator flagged the job for engineering (`detail`: `by`, `note`, `link`, `updated`); the "
    "alarm topic was told.",
    "escalation_cleared": "An operator cleared the job's escalation (`detail.by`).",
    "job_completed_by_person": "A person wrote the failed job's result through a review of kind `complete`, and "
    "the workflow's rules passed it: the job completed (`detail`: `by`, `review_id`, `requested_by`).",
    "job_terminated": "An operator ended the job for good (`detail.by`, `detail.reason`): `failed` with "
    "`detail.message` as its error's message, or `cancelled` with it as its `cancellation.message`.",
    "replay_not_started": "A replay's new attempt could not start: the job was put back as it was.",
    "redrive_refused": "Step Functions refused a redrive: the job was put back as it was.",
    # Steps and items.
    "step_started": "An attempt of a step (or of a fan-out's item) started.",
    "step_finished": "A step (or item) finished and its checkpoint was written.",
    "step_skipped": "A step with `when=` did not run: its predicate over earlier outputs did not hold (`detail.when`).",
    "child_started": "A child step started another workflow's job for this one and waits for it (`detail`: "
    "`child_job_id`, `workflow`).",
    "child_finished": "A child step's job ended (`detail`: `child_job_id`, `status`); its usage and cost were added "
    "to this job's.",
    "then_submitted": "The job completed and the job its request chained with `then` was submitted (`detail`: "
    "`job_id`, `workflow`).",
    "then_refused": "The job completed but the job its `then` chains could not be submitted (`detail.message`).",
    "step_attempt_failed": "An attempt of a step failed: its error kind, and whether it will be retried.",
    "provisional_result": "A `provisional` step finished: its output is the job's provisional result "
    "(`GET …/result?provisional=true`) until the final one.",
    "item_failed": "A fan-out's item failed for good and was sent to its dead-letter queue.",
    "job_stuck": "The sweep found the job idle for longer than `LONGHAUL_STUCK_AFTER_MINUTES`.",
    "replay_waiting": "A replayed job waits for an admission slot before it starts.",
    "dead_letters_removed": "A replay removed the job's dead letters from their queues.",
    # Model calls and their guardrails.
    "model_called": "A model was called: route, model, service tier, tokens, cost and the prompt's hash.",
    "output_capped_by_budget": "A call's output cap was lowered to what is left of the job's or the tenant's budget.",
    "model_call_reused": "A retried attempt reused a model call already paid for (its recorded answer).",
    "model_batch_submitted": "A fan-out's model calls went to Bedrock as one batch inference job, at the batch price "
    "(`detail`: `step`, `records`, `batch_id`); the execution waits for it with no compute held.",
    "model_batch_finished": "A step's batch inference job ended (`detail`: `step`, `records`, `succeeded`, `failed`, "
    "`on_demand_after`: the records without an answer, called on demand by their items).",
    "model_batch_skipped": "A job in the batch lane called a fan-out's models on demand: `detail.reason` says why "
    "(below the model's minimum of records, a deadline too near, no batch role, a provider without batch).",
    "model_failover": "A route failed and the call went to its fallback route.",
    "route_rate_limited": "A call found no room under its route's shared `requests_per_minute`/`tokens_per_minute` "
    "within its bounded wait: the step fails `rate-limited` and its retry tries again later.",
    "breaker_opened": "A model route's circuit breaker opened after repeated failures: calls skip it.",
    "breaker_half_open": "An open breaker's cool-down ended: the next call tries the route again.",
    "breaker_closed": "A route's breaker closed again after a call succeeded.",
    "budget_exceeded": "A model call was refused: it could exceed the job's or the tenant's budget.",
    "output_repaired": "A model's output was not valid as it came and was repaired mechanically.",
    "output_validation_failed": "A model's output failed validation at one rung of the ladder.",
    "feedback_retry": "The model was asked again with the validation errors as feedback.",
    "escalated_to_stronger_route": "The call went to the route's stronger model after validation failures.",
    "output_invalid": "The output stayed invalid at every rung: the step fails `output-invalid`.",
    # Workflow steps' own events.
    "extraction_retried": "An invoice's extraction was retried after its figures did not add up.",
    "summary_blocked": "A model summary quoted figures the data does not hold: a deterministic summary was used.",
    # Human review.
    "review_requested": "A review was opened: for whom, until when, and why.",
    "review_reminder": "A pending review passed its first rung: its group was reminded.",
    "review_reassigned": "A pending review passed its second rung: it moved to the secondary group.",
    "review_auto_approved": "The review's deadline passed and the workflow's policy approved the draft.",
    "review_decided": "A reviewer decided (approve, reject or edit); the job resumes.",
    "manual_completion_requested": "An operator handed the failed job to a person, who writes its result: a review "
    "of kind `complete` was opened (`detail`: `by`, `review_id`, `assignee_group`, `note`).",
    # Signals and segments.
    "signal_received": "A signal was sent to the job and accepted (`detail`: `name`, `early`: sent before its step "
    "waited for it); its step consumes it once.",
    "signal_timed_out": "A signal step's wait ended without its signal (`detail`: `name`, `timeout_seconds`, "
    "`on_timeout`): the job proceeds without it or fails.",
    "segment_timed_out": "A segment of steps ran past its bound (`detail`: `segment`, `timeout_seconds`): the job "
    "fails (error kind `timeout`) or goes to review.",
    # Agents, their tools' side effects, memory and compensation.
    "agent_turn": "An agent step's turn: tokens, the tools it called, whether it finished.",
    "agent_limit_reached": "An agent step reached a limit (turns, tool calls, deadline or budget).",
    "effect_done": "A tool's side effect was done and its outcome recorded in the outbox.",
    "effect_unknown": "An attempt died after acting and before recording: the side effect's outcome is unknown.",
    "fact_retired": "A long-term memory fact was found stale or contradicted and retired.",
    "saga_started": "The job's compensation started: the side effects to undo.",
    "compensation_started": "A side effect's compensation started.",
    "compensation_finished": "A side effect was undone.",
    "compensation_failed": "A side effect's compensation failed.",
    "saga_finished": "The compensation ended: how many side effects were undone and how many were not.",
    # Bookkeeping.
    "void": "A reserved event number whose writer failed: readers skip it, it is never shown.",
}
