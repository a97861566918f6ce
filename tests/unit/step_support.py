"""What the runner's and the failure recorder's tests share: a job of a small test workflow, step events, a fake
work function, and typed reads of the job, its events and its step records."""

from __future__ import annotations

from typing import Any

import pytest
from boto3.dynamodb.conditions import Key

from longhaul.core.contracts import EventView, JobStatus
from longhaul.core.records import Job
from longhaul.engine.context import StepContext
from longhaul.engine.spec import step
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.workflows import REGISTRY, WorkflowSpec

JOB_ID = "job_runner_1"
TENANT = "tenant-a"
WORKFLOW = "document-analysis"  # the events name a deployed workflow; the spec passed to the runner is the test's


def spec_of(*names: str) -> WorkflowSpec:
    """A workflow spec with these plain steps (their work is passed to `run_step`, never imported)."""
    real = REGISTRY[WORKFLOW]
    return WorkflowSpec(
        name=WORKFLOW,
        description="test steps",
        input_model=real.input_model,
        result_model=real.result_model,
        steps=tuple(step(n) for n in names),
        domain="tests.unit.test_runner",
    )


SPEC = spec_of("a", "b")


@pytest.fixture
def job(store: JobStore) -> Job:
    created, _ = store.create_job(
        NewJob(
            job_id=JOB_ID,
            tenant_id=TENANT,
            workflow=WORKFLOW,
            input_key=f"work/{JOB_ID}/input.json",
            payload_hash="h",
            model="offline:test",
            estimated_sla_seconds=30,
            total_steps=len(SPEC.steps),
        )
    )
    return created


def step_event(step: str, attempt: int = 0, steps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "step": step,
        "attempt": attempt,
        "input": {
            "job_id": JOB_ID,
            "tenant_id": TENANT,
            "workflow": WORKFLOW,
            "input_key": f"work/{JOB_ID}/input.json",
            "steps": steps or {},
        },
    }


class FakeWork:
    """A work function that records its calls and returns (or raises) what it is told to."""

    def __init__(self, result: dict[str, Any] | Exception | None = None) -> None:
        self.result = {"chunks_key": "work/x/chunks.json"} if result is None else result
        self.calls: list[StepContext] = []

    def __call__(self, ctx: StepContext) -> dict[str, Any]:
        self.calls.append(ctx)
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def partition(table: Any) -> list[dict[str, Any]]:
    return table.query(KeyConditionExpression=Key("pk").eq(f"JOB#{JOB_ID}"), ConsistentRead=True)["Items"]


def events(store: JobStore) -> list[EventView]:
    return store.list_events(JOB_ID, limit=200)[0]


def event_types(store: JobStore) -> list[str]:
    return [e.type for e in events(store)]


def current(store: JobStore) -> Job:
    job = store.get_job(JOB_ID)
    assert job is not None
    return job


def status(store: JobStore) -> JobStatus:
    return current(store).status


def step_status(checkpoints: CheckpointStore, step: str) -> str | None:
    record = checkpoints.get_step(JOB_ID, step)
    return record.status if record else None


def running_job(jobs: JobStore, job_id: str, **fields: Any) -> Job:
    """A document-analysis job of tenant-a, created and started (`fields` over a small test job's: budgets of 100,000
    tokens and $10, no route, the standard class)."""
    defaults: dict[str, Any] = {
        "tenant_id": TENANT,
        "workflow": WORKFLOW,
        "input_key": "k",
        "payload_hash": "h",
        "model": "m",
        "estimated_sla_seconds": 1,
        "budget_tokens": 100_000,
        "budget_cost_micro": 10_000_000,
    }
    jobs.create_job(NewJob(job_id=job_id, **{**defaults, **fields}))
    job = jobs.transition(job_id, JobStatus.RUNNING, event="job_started")
    assert job is not None
    return job
