"""Starting sagas: each job attempt that ended with side effects to compensate has a saga item (written with its
terminal status); the dispatcher, woken when one is written and every minute, starts the workflow's state machine on
it (`<job>-c<attempt>`, the compensation lane) once. Reaches AWS through the engine port only."""

from __future__ import annotations

from longhaul.core.observability import logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.records import SagaRecord
from longhaul.core.step_events import WorkflowState
from longhaul.services import Services


def saga_state(services: Services, saga: SagaRecord) -> WorkflowState:
    """The compensation execution's input: the job's state document with `saga` set."""
    job = services.jobs.get_job(saga.job_id)
    return WorkflowState(
        job_id=saga.job_id,
        tenant_id=saga.tenant_id,
        workflow=saga.workflow,
        input_key=job.input_key if job else "",
        saga={"attempt": saga.attempt},
    )


def start_pending(services: Services, *, limit: int = 100) -> list[str]:
    """Start the compensation of every pending saga (an execution that exists counts as started); their job ids."""
    started: list[str] = []
    for saga in services.effects.sagas("pending", limit=limit):
        if saga.workflow not in services.settings.workflows:
            continue
        try:
            services.engine.start(saga.workflow, saga.execution_name, saga_state(services, saga).model_dump())
        except EngineUnavailable:
            logger.warning("compensation not started; the next round tries again", extra={"job_id": saga.job_id})
            continue
        services.effects.mark_saga(saga, "started")
        started.append(saga.job_id)
    if started:
        logger.info("compensations started", extra={"jobs": started})
    return started
