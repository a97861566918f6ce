"""The intake queues on moto's SQS (`longhaul.adapters.intake.SqsIntakeQueues`) under the dispatcher: poison is
logged once and reaches the dead-letter queue after at most `MAX_RECEIVES` receives without failing a round or
holding a valid job back, and a job that waits many rounds is never dead-lettered for waiting."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest

from longhaul import services as wiring
from longhaul.adapters.intake import MAX_RECEIVES, SqsIntakeQueues
from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import JobStatus
from longhaul.operations.admission import Admission
from longhaul.storage.budgets import BudgetStore
from tests.unit.aws_env import REGION
from tests.unit.conftest import TENANT_A, TENANT_B
from tests.unit.fakes import FakeEngine, FakeWake
from tests.unit.test_admission import create

JOB_1, JOB_2 = f"job_{1:028x}", f"job_{2:028x}"
POISON = [
    "[1]",
    "null",
    "not json at all",
    '"a string"',
    "{}",
    '{"job_id": "job_1", "tenant_id": "t", "sla_class": "standard", "queued_at": "yesterday"}',
    '{"job_id": "job_' + "0" * 28 + '", "tenant_id": "t", "sla_class": "batch", "queued_at": "2025-01-02T03:04:05Z"}',
]


@pytest.fixture
def queues(aws: None) -> tuple[Any, dict[str, str], dict[str, str]]:
    """An intake queue per class with its dead-letter queue, as `stacks/admission.py` builds them."""
    sqs = boto3.client("sqs", region_name=REGION)
    intake: dict[str, str] = {}
    dead: dict[str, str] = {}
    for sla_class in ("interactive", "standard", "batch"):
        dead[sla_class] = sqs.create_queue(QueueName=f"{sla_class}-dead")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=dead[sla_class], AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": MAX_RECEIVES})
        intake[sla_class] = sqs.create_queue(QueueName=f"{sla_class}-intake", Attributes={"RedrivePolicy": redrive})[
            "QueueUrl"
        ]
    return sqs, intake, dead


@pytest.fixture
def admitted(services: wiring.Services, queues: tuple[Any, dict[str, str], dict[str, str]]) -> wiring.Services:
    """Admission control on the real adapter. Its messages are hidden for 0 s, so that each round receives again what
    the previous one left (the deployed queues hide them for two minutes)."""
    sqs, intake, _ = queues
    settings = services.settings.model_copy(update={"max_jobs_in_flight": 4, "intake_queues": intake})
    return dataclasses.replace(
        services,
        settings=settings,
        intake=SqsIntakeQueues(sqs, intake, hide_seconds=0),
        wake=FakeWake(),
        engine=FakeEngine(),
    )


def bodies(sqs: Any, url: str) -> list[str]:
    found = []
    for _ in range(5):
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)
        found += [m["Body"] for m in messages.get("Messages", [])]
    return found


def wait_for_a_slot(
    services: wiring.Services, job_id: str, tenant: str = TENANT_A, sla_class: str = "standard"
) -> None:
    job = create(services, job_id, tenant, sla_class)
    Admission(services).admit(job, services.budgets.policy(tenant))


def test_poison_is_logged_once_and_dead_lettered_within_its_receives_while_valid_jobs_start(
    admitted: wiring.Services,
    queues: tuple[Any, dict[str, str], dict[str, str]],
    table: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    sqs, intake, dead = queues
    # Given tenant A at its limit of one job, a second job of A waiting, and poison around its message
    BudgetStore(table).put_policy(TENANT_A, TenantPolicy(jobs_in_flight=1))
    wait_for_a_slot(admitted, JOB_1)
    for body in POISON[:3]:
        sqs.send_message(QueueUrl=intake["standard"], MessageBody=body)
    wait_for_a_slot(admitted, JOB_2)
    for body in POISON[3:]:
        sqs.send_message(QueueUrl=intake["standard"], MessageBody=body)
    caplog.clear()
    # and A's first job ends, which frees its slot
    admitted.jobs.transition(JOB_1, JobStatus.RUNNING, event="job_started")
    admitted.jobs.transition(JOB_1, JobStatus.COMPLETED, event="job_completed")

    # When rounds run (more of them than a message may be received)
    reports = [Admission(admitted).dispatch() for _ in range(MAX_RECEIVES + 2)]

    # Then the waiting job started in the first round, and no round failed
    assert reports[0].started == [JOB_2]
    assert len(reports[0].poison) == 0  # poison carries no job: the adapter leaves it out
    # every poison message is in the dead-letter queue, and nothing is left in the intake queue
    assert sorted(bodies(sqs, dead["standard"])) == sorted(POISON)
    assert bodies(sqs, intake["standard"]) == []
    # each poison message was logged once, with its reason
    poison = [r for r in caplog.records if r.getMessage().startswith("poison intake message")]
    assert len(poison) == len(POISON)
    assert all(r.reason and r.max_receives == MAX_RECEIVES for r in poison)


def test_a_job_waiting_many_rounds_is_never_dead_lettered_for_waiting(
    admitted: wiring.Services, queues: tuple[Any, dict[str, str], dict[str, str]], table: Any
) -> None:
    sqs, intake, dead = queues
    # Given a tenant at its limit with a job waiting
    BudgetStore(table).put_policy(TENANT_A, TenantPolicy(jobs_in_flight=1))
    wait_for_a_slot(admitted, JOB_1)
    wait_for_a_slot(admitted, JOB_2, sla_class="batch")

    # When many more rounds run than a message may be received
    for _ in range(3 * MAX_RECEIVES):
        assert Admission(admitted).dispatch().kept == 1

    # Then the waiting job's message is still in its queue (renewed every round), nothing in the dead letters
    assert [json.loads(b)["job_id"] for b in bodies(sqs, intake["batch"])] == [JOB_2]
    assert bodies(sqs, dead["batch"]) == []


def test_a_message_that_names_another_tenant_never_takes_a_slot(
    admitted: wiring.Services, queues: tuple[Any, dict[str, str], dict[str, str]]
) -> None:
    sqs, intake, dead = queues
    # Given a waiting job of tenant A, and a message for it that claims tenant B
    wait_for_a_slot(admitted, JOB_1)
    admitted.admission.enqueue(create(admitted, JOB_2), admitted.now())
    forged = {"job_id": JOB_2, "tenant_id": TENANT_B, "sla_class": "standard"}
    sqs.send_message(
        QueueUrl=intake["standard"], MessageBody=json.dumps({**forged, "queued_at": "2025-01-02T03:04:05Z"})
    )

    # When rounds run
    reports = [Admission(admitted).dispatch() for _ in range(MAX_RECEIVES + 1)]

    # Then the forged message started nothing, and B's counters were never touched
    assert all(JOB_2 not in r.started for r in reports)
    assert admitted.admission.counters(TENANT_B).tenant_in_flight == 0
    assert [json.loads(b)["tenant_id"] for b in bodies(sqs, dead["standard"])] == [TENANT_B]
