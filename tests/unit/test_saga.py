"""The saga of a job that ended after side effects: the compensation lane's actions (plan, undo in reverse order,
failed, finish) over the real stores on moto, the dispute tools' compensations with a fake mailer, and the
dispatcher starting the lane's execution once per saga."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from longhaul.core.contracts import JobStatus
from longhaul.core.records import EffectRecord, Job
from longhaul.engine import saga
from longhaul.engine.tools import operation_id
from longhaul.operations.compensation import start_pending
from longhaul.services import Services
from longhaul.storage.jobs import NewJob
from tests.unit.fakes import FakeEngine
from tests.unit.test_sweep import read

S = JobStatus
WORKFLOW = "dispute-resolution"
JOB = "job_" + "5a9a" * 7  # a job id as the API accepts it


@dataclass
class FakeMailer:
    sent: list[tuple[str, str, str]] = field(default_factory=list)
    refuse: bool = False

    def send(self, *, to: str, subject: str, body: str, operation_id: str) -> str:
        if self.refuse:
            from longhaul.core.errors import TransientError

            raise TransientError("SES throttled")
        self.sent.append((to, subject, operation_id))
        return f"msg-{len(self.sent)}"


@pytest.fixture
def mailer() -> FakeMailer:
    return FakeMailer()


@pytest.fixture
def saga_services(services: Services, mailer: FakeMailer) -> Services:
    settings = services.settings.model_copy(update={"workflows": {WORKFLOW: "arn:aws:states:::stateMachine:disputes"}})
    return dataclasses.replace(services, mailer=mailer, settings=settings)


def sent_notice(services: Services, vendor: str, call: int) -> EffectRecord:
    """A notice to `vendor` sent by call `call` of the send step's first turn, recorded in the outbox."""
    effect = services.effects.intend(
        EffectRecord(
            operation_id=operation_id(JOB, "send_notices", 0, call),
            job_id=JOB,
            tenant_id="tenant-a",
            step="send_notices",
            turn=0,
            call=call,
            seq=0,
            tool="send_notice",
            side_effect="irreversible",
            input={"vendor": vendor},
            input_hash=f"h{call}",
            owner="0001.0000",
            intended_at=services.now(),
            compensation="send_retraction",
        )
    )
    output = {"vendor": vendor, "to": f"{vendor.lower()}@example.com", "subject": f"Dispute {vendor}",
              "message_id": f"m{call}", "status": "sent"}  # fmt: skip
    return services.effects.outcome(effect, "done", output=output)


@pytest.fixture
def ended(saga_services: Services) -> Job:
    """A dispute job that sent two notices and was then cancelled."""
    s = saga_services
    s.jobs.create_job(NewJob(JOB, "tenant-a", WORKFLOW, f"work/{JOB}/input.json", "h", "offline:test", 30))
    s.jobs.transition(JOB, S.RUNNING, event="job_started")
    sent_notice(s, "Orion", 0)
    sent_notice(s, "Vega", 1)
    s.jobs.transition(JOB, S.CANCEL_REQUESTED, event="cancel_requested")
    return s.jobs.transition(JOB, S.CANCELLED, event="job_cancelled")


def action(name: str, **fields: Any) -> dict[str, Any]:
    return {"action": name, "job_id": JOB, "workflow": WORKFLOW, "attempt": 1, "execution": f"{JOB}-c1", **fields}


def run_lane(services: Services) -> list[str]:
    """What the state machine does: plan, then undo until nothing is left, then finish; the operations undone."""
    undone = []
    plan = saga.handle(action("plan"), services)
    while plan["remaining"]:
        undone.append(plan["next"])
        plan = saga.handle(action("undo", operation_id=plan["next"]), services)
    saga.handle(action("finish"), services)
    return undone


def types(services: Services) -> list[str]:
    return [e.type for e in services.jobs.list_events(JOB, limit=200)[0]]


def test_the_dispatcher_starts_the_lane_once_per_saga(saga_services: Services, ended: Job, engine: FakeEngine) -> None:
    assert ended.compensation is not None and ended.compensation.status == "pending"

    assert start_pending(saga_services) == [JOB]
    assert start_pending(saga_services) == []  # started: not again

    (started,) = engine.started
    assert (started.workflow, started.execution) == (WORKFLOW, f"{JOB}-c1")
    assert started.state["saga"] == {"attempt": 1} and started.state["job_id"] == JOB


def test_compensations_run_latest_first_and_the_job_lists_what_was_undone(
    saga_services: Services, ended: Job, mailer: FakeMailer
) -> None:
    undone = run_lane(saga_services)

    assert undone == [operation_id(JOB, "send_notices", 0, 1), operation_id(JOB, "send_notices", 0, 0)]
    assert [subject for _, subject, _ in mailer.sent] == ["Withdrawn: Dispute Vega", "Withdrawn: Dispute Orion"]
    job = read(saga_services.jobs, JOB)
    assert job.compensation is not None and job.compensation.status == "finished"
    assert [u.operation_id for u in job.compensation.undone] == undone and job.compensation.not_undone == []
    lane = types(saga_services)[types(saga_services).index("saga_started") :]
    assert lane == [
        "saga_started",
        "compensation_started",
        "compensation_finished",
        "compensation_started",
        "compensation_finished",
        "saga_finished",
    ]


def test_an_undo_that_finished_is_not_run_again(saga_services: Services, ended: Job, mailer: FakeMailer) -> None:
    latest = operation_id(JOB, "send_notices", 0, 1)
    saga.handle(action("plan"), saga_services)
    saga.handle(action("undo", operation_id=latest), saga_services)
    saga.handle(action("undo", operation_id=latest), saga_services)  # a retried Task

    assert len(mailer.sent) == 1


def test_a_compensation_that_gives_up_is_dead_lettered_and_listed_as_not_undone(
    saga_services: Services, ended: Job, dead_letters: Any
) -> None:
    latest = operation_id(JOB, "send_notices", 0, 1)
    saga.handle(action("plan"), saga_services)
    letter = saga.handle(
        action("failed", operation_id=latest, error="TransientError", cause="SES throttled"), saga_services
    )
    left = run_lane(saga_services)

    assert letter["step"] == "compensation" and letter["job_id"] == JOB and "send_notice" in letter["item_name"]
    assert [d.job_id for d in dead_letters.letters] == [JOB]
    assert left == [operation_id(JOB, "send_notices", 0, 0)]
    job = read(saga_services.jobs, JOB)
    assert job.compensation is not None and job.compensation.status == "incomplete"
    (missed,) = job.compensation.not_undone
    assert missed.operation_id == latest and "SES throttled" in missed.reason
    assert "compensation_failed" in types(saga_services)


def test_a_job_replayed_meanwhile_is_not_compensated(saga_services: Services, ended: Job, mailer: FakeMailer) -> None:
    saga_services.jobs.transition(JOB, S.QUEUED, event="job_replayed", set_fields={"attempts": 2})

    assert saga.handle(action("plan"), saga_services) == {"remaining": 0, "next": None}
    assert mailer.sent == []


def test_a_replay_waits_for_a_running_compensation(saga_services: Services, ended: Job) -> None:
    from longhaul.core.auth import Principal
    from longhaul.core.problems import ApiProblem
    from longhaul.operations.replay import replay

    with pytest.raises(ApiProblem) as refused:
        replay(
            saga_services,
            Principal(tenant_id="ops", role="operator", key_id="k"),
            JOB,
            from_step="send_notices",
            reason="retry it",
        )
    assert refused.value.status == 409 and "compensation" in str(refused.value)
    assert read(saga_services.jobs, JOB).status == S.CANCELLED


def test_a_lane_that_fails_itself_records_what_is_left_undone(saga_services: Services, ended: Job) -> None:
    saga.handle(action("plan"), saga_services)
    saga.handle(action("failed", error="InternalError", cause="the table was unreachable"), saga_services)

    job = read(saga_services.jobs, JOB)
    assert job.compensation is not None and job.compensation.status == "incomplete"
    assert len(job.compensation.not_undone) == 2 and job.compensation.undone == []
