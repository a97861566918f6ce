"""A tool with a side effect acts once per operation id: its intent is written before the effect (only while the
job runs), its outcome after, and a retried turn answers from the outbox. The stores are the real ones on moto; the
tools are this module's, which count their calls."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from longhaul.core.contracts import JobStatus
from longhaul.core.errors import CancelledError, TransientError
from longhaul.core.records import Job
from longhaul.engine.spec import Tool, Undo
from longhaul.engine.tools import ToolContext, ToolRefused, operation_id, run_call
from longhaul.services import Services
from longhaul.workflows import REGISTRY
from tests.unit.test_sweep import create, read

S = JobStatus
CALLS: list[str] = []


class Say(BaseModel):
    text: str


class Said(BaseModel):
    text: str
    calls: int


def say(ctx: ToolContext, request: Say) -> Said:
    CALLS.append(request.text)
    if request.text == "refuse":
        raise ToolRefused("not that one")
    if request.text == "flaky":
        raise TransientError("the provider throttled")
    return Said(text=request.text, calls=len(CALLS))


def unsay(ctx: ToolContext, undo: Undo) -> Said:
    CALLS.append(f"undo {undo.input['text']}")
    return Said(text=undo.input["text"], calls=len(CALLS))


HERE = __name__  # the module as pytest imported it (the tools import it by this name)
SAY = Tool("say", "Says it, once.", Say, Said, run=f"{HERE}:say", side_effect="irreversible", compensation="unsay")
NOTE = Tool("note", "Notes it, reversibly.", Say, Said, run=f"{HERE}:say", side_effect="reversible")
LOOK = Tool("look", "Looks; no effect.", Say, Said, run=f"{HERE}:say")
ALLOWED = ("say", "note", "look")


@pytest.fixture(autouse=True)
def fresh_calls() -> None:
    CALLS.clear()


@pytest.fixture
def job(services: Services) -> Job:
    return read(services.jobs, create(services, to=[S.RUNNING]))


def call(services: Services, job: Job, tool: Tool, text: str, *, turn: int = 0, index: int = 0, retry: int = 0):
    ctx = ToolContext(services, job, REGISTRY["dispute-resolution"], "send_notices", turn, index)
    return run_call(ctx, tool, {"text": text}, allowed=ALLOWED, job_attempt=job.attempts, retry=retry)


def test_a_side_effect_happens_once_however_often_its_turn_is_retried(services: Services, job: Job) -> None:
    first = call(services, job, SAY, "hello")
    again = call(services, job, SAY, "hello", retry=1)

    assert CALLS == ["hello"]
    assert first.ok and not first.replayed and again.ok and again.replayed
    assert first.operation_id == again.operation_id == operation_id(job.job_id, "send_notices", 0, 0)
    assert again.output == first.output
    (effect,) = services.effects.of_job(job.job_id)
    assert (effect.status, effect.tool, effect.compensation) == ("done", "say", "unsay")
    assert read(services.jobs, job.job_id).compensable_effects == 1  # counted with its intent


def test_an_effect_whose_outcome_was_never_recorded_is_not_repeated(services: Services, job: Job) -> None:
    ctx = ToolContext(services, job, REGISTRY["dispute-resolution"], "send_notices", 0, 0)
    from longhaul.core import faults

    faults.install(faults.FaultInjector("send_notices=crash-before-outcomex1"))
    try:
        with pytest.raises(faults.CrashFault):
            run_call(ctx, SAY, {"text": "hello"}, allowed=ALLOWED, job_attempt=1, retry=0)
    finally:
        faults.install(faults.FaultInjector())

    retried = call(services, job, SAY, "hello", retry=1)

    assert CALLS == ["hello"], "the retry did not act again"
    assert not retried.ok and retried.status == "unknown"
    assert services.effects.of_job(job.job_id)[0].status == "unknown"


def test_a_delivery_of_the_same_attempt_finding_the_intent_waits_for_the_outcome(services: Services, job: Job) -> None:
    ctx = ToolContext(services, job, REGISTRY["dispute-resolution"], "send_notices", 0, 0)
    from longhaul.core import faults

    faults.install(faults.FaultInjector("send_notices=crash-before-outcomex1"))
    try:
        with pytest.raises(faults.CrashFault):
            run_call(ctx, SAY, {"text": "hello"}, allowed=ALLOWED, job_attempt=1, retry=0)
    finally:
        faults.install(faults.FaultInjector())

    with pytest.raises(TransientError):  # as if another delivery of that very attempt were acting now
        call(services, job, SAY, "hello", retry=0)


def test_a_reversible_effect_left_pending_is_done_again(services: Services, job: Job) -> None:
    from longhaul.core import faults

    ctx = ToolContext(services, job, REGISTRY["dispute-resolution"], "send_notices", 0, 0)
    faults.install(faults.FaultInjector("send_notices=crash-before-outcomex1"))
    try:
        with pytest.raises(faults.CrashFault):
            run_call(ctx, NOTE, {"text": "memo"}, allowed=ALLOWED, job_attempt=1, retry=0)
    finally:
        faults.install(faults.FaultInjector())

    again = call(services, job, NOTE, "memo", retry=1)

    assert again.ok and CALLS == ["memo", "memo"] and services.effects.of_job(job.job_id)[0].status == "done"


def test_a_refused_or_failed_effect_did_not_happen_and_runs_again(services: Services, job: Job) -> None:
    refused = call(services, job, SAY, "refuse")
    assert not refused.ok and refused.error == "not that one"
    assert services.effects.of_job(job.job_id)[0].status == "failed"
    with pytest.raises(TransientError):
        call(services, job, SAY, "flaky", index=1)
    failed = services.effects.get(job.job_id, operation_id(job.job_id, "send_notices", 0, 1))
    assert failed is not None and failed.status == "failed" and not failed.acted
    assert read(services.jobs, job.job_id).compensable_effects == 2  # counted when intended; the saga skips them


def test_another_call_under_the_same_number_is_an_operation_of_its_own(services: Services, job: Job) -> None:
    first = call(services, job, SAY, "hello")
    other = call(services, job, SAY, "goodbye", retry=1)  # a replayed turn in which the model said something else

    assert other.ok and not other.replayed and CALLS == ["hello", "goodbye"]
    assert other.operation_id != first.operation_id and other.operation_id.startswith(first.operation_id or "")


def test_no_effect_starts_for_a_job_that_no_longer_runs(services: Services) -> None:
    jid = create(services, to=[S.RUNNING, S.CANCEL_REQUESTED])
    with pytest.raises(CancelledError):
        call(services, read(services.jobs, jid), SAY, "hello")
    assert CALLS == [] and services.effects.of_job(jid) == []


def test_the_models_mistakes_are_its_result_not_failures(services: Services, job: Job) -> None:
    ctx = ToolContext(services, job, REGISTRY["dispute-resolution"], "send_notices", 0, 0)
    not_allowed = run_call(ctx, SAY, {"text": "x"}, allowed=("look",), job_attempt=1, retry=0)
    invalid = run_call(ctx, LOOK, {"words": 3}, allowed=ALLOWED, job_attempt=1, retry=0)
    looked = call(services, job, LOOK, "around")

    assert not not_allowed.ok and "may call" in (not_allowed.error or "")
    assert not invalid.ok and (invalid.error or "").startswith("invalid input: text")
    assert looked.ok and looked.operation_id is None and services.effects.of_job(job.job_id) == []


def test_a_job_ending_after_effects_with_a_compensation_gets_its_saga(services: Services, job: Job) -> None:
    call(services, job, SAY, "hello")

    failed = services.jobs.transition(job.job_id, S.FAILED, event="job_failed")

    assert failed.compensation is not None and failed.compensation.status == "pending"
    (saga,) = services.effects.sagas("pending")
    assert (saga.job_id, saga.attempt, saga.execution_name) == (job.job_id, 1, f"{job.job_id}-c1")


def test_a_job_without_effects_to_compensate_gets_no_saga(services: Services, job: Job) -> None:
    call(services, job, NOTE, "memo")  # reversible, without a compensation

    services.jobs.transition(job.job_id, S.FAILED, event="job_failed")

    assert read(services.jobs, job.job_id).compensation is None and services.effects.sagas("pending") == []
