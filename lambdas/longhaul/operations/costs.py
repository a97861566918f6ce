"""A job's cost on AWS: counting its executions' state transitions (what each step invocation used is recorded by
`longhaul.engine.usage`).

Transitions (the Step Functions Standard bill), counted from the execution history, the rule used here:
- every `*StateEntered` event is one transition (a state entered; inside an inline Map every iteration enters its
  states, so each iteration's states count, as AWS bills them);
- every retry of a Task is one more: a `*Scheduled` event whose previous event is not its state's `*StateEntered`
  (AWS bills retries as transitions; the history shows them as another scheduling, without a new state entered);
- a Distributed Map's child executions are executions of their own: their transitions count too, when the engine
  lists them. When it does not (no permission, or the local engine, which keeps no child executions), the children
  are estimated from below: one transition per step invocation the job recorded that no history shows scheduled
  (each ran in a Task state entered, or retried, in a child), and the cost says `estimated`.
They are counted once, on the first read after every execution of the job has ended, and stored on the job: a
status read never pages a history twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from longhaul.core.observability import logger
from longhaul.core.ports import EngineUnavailable, ExecutionStatus, HistoryEvent
from longhaul.core.records import Job, compensation_execution
from longhaul.services import Services

SCHEDULED = ("TaskScheduled", "LambdaFunctionScheduled", "ActivityScheduled")


def count_transitions(events: Sequence[HistoryEvent]) -> int:
    """Billed state transitions of one execution's history (the module's rule)."""
    by_id = {e.id: e for e in events}
    entered = sum(1 for e in events if e.type.endswith("StateEntered"))
    retries = 0
    for event in events:
        if event.type in SCHEDULED and event.previous_id is not None:
            previous = by_id.get(event.previous_id)
            if previous is not None and not previous.type.endswith("StateEntered"):
                retries += 1
    return entered + retries


def lambda_scheduled(events: Sequence[HistoryEvent]) -> int:
    """Lambda invocations a history shows (each attempt of a Lambda Task)."""
    return sum(1 for e in events if e.type in SCHEDULED and e.resource_type == "lambda")


def executions_of(job: Job) -> list[str]:
    """The names of the job's executions: the first, then one per replay (a redrive reuses its execution), and the
    compensation lane's of each attempt once the job has had a saga (one that never ran has an empty history)."""
    names = [job.job_id, *(f"{job.job_id}-r{n}" for n in range(2, job.attempts + 1))]
    if job.execution_name not in names:
        names.append(job.execution_name)
    if job.compensation is not None:
        names += [compensation_execution(job.job_id, n) for n in range(1, job.attempts + 1)]
    return names


def with_transitions(services: Services, job: Job) -> Job:
    """The job, its transitions counted and stored if it has finished and its executions have ended; else as is."""
    if not job.finished or job.transitions_counted:
        return job
    if job.compensation is not None and job.compensation.status in ("pending", "running"):
        return job  # its compensation lane still runs: count once it has ended
    try:
        if services.engine.describe(job.workflow, job.execution_name).status == ExecutionStatus.RUNNING:
            return job  # the execution still runs its last states (callback, completion): count later
        transitions = history_events = lambda_tasks = 0
        complete = True
        for name in executions_of(job):
            history = services.engine.history(job.workflow, name)
            transitions += count_transitions(history.events) + sum(count_transitions(c) for c in history.children)
            history_events += len(history.events)
            lambda_tasks += lambda_scheduled(history.events) + sum(lambda_scheduled(c) for c in history.children)
            complete = complete and history.complete
        if not complete:
            transitions += max(0, job.metered.lambda_invocations - lambda_tasks)
    except EngineUnavailable:
        logger.warning("transitions not counted; the next read tries again", extra={"job_id": job.job_id})
        return job
    services.usage.set_transitions(
        job.job_id, attempt=job.attempts, transitions=transitions, history_events=history_events, complete=complete
    )
    return job.model_copy(
        update={
            "orchestration_transitions": transitions,
            "orchestration_history_events": history_events,
            "orchestration_counted_attempt": job.attempts,
            "orchestration_complete": complete,
        }
    )
