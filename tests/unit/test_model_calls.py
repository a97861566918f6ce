"""The model gateway of a step: each rung of the validation ladder, failover, breakers and budgets together.

The adapters are scripted fakes of the model port (what a provider answered); everything else (ledger, job,
breakers, events) is the real code on moto.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core import faults
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import BudgetExceededError, CancelledError, OutputInvalidError, UpstreamUnavailableError
from longhaul.core.llm import ModelRequest, ModelResponse, Usage
from longhaul.core.routes import Route
from longhaul.core.settings import Settings
from longhaul.guardrails.gateway import ModelCalls
from longhaul.storage.jobs import NewJob
from longhaul.workflows import REGISTRY

JOB = "job_mc_1"


class Answer(BaseModel):
    answer: str
    score: float


GOOD = json.dumps({"answer": "yes", "score": 0.5})


class Scripted:
    """A model that answers from a script (text, stop reason) or raises, and counts its calls."""

    def __init__(self, model_id: str, script: list[tuple[str, str] | Exception]) -> None:
        self.model_id = model_id
        self.script = script
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(item, Exception):
            raise item
        text, stop = item
        return ModelResponse(
            text=text, usage=Usage(input_tokens=10, output_tokens=5), model_id=self.model_id, stop_reason=stop
        )


ROUTES = {
    "default": {"provider": "offline", "model_id": "primary", "stronger": "strong", "fallback": "backup"},
    "strong": {"provider": "offline", "model_id": "strong"},
    "backup": {"provider": "offline", "model_id": "backup"},
    "alone": {"provider": "offline", "model_id": "alone"},
}


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> dict[str, Scripted]:
    scripted = {name: Scripted(name, [(GOOD, "end_turn")]) for name in ("primary", "strong", "backup", "alone")}

    def adapter(route: Route) -> Scripted:
        return scripted[route.model_id]

    adapter.cache_clear = lambda: None  # type: ignore[attr-defined]  # as the real one's lru_cache has
    monkeypatch.setattr(wiring, "_adapter", adapter)
    return scripted


@pytest.fixture
def gateway_services(services: wiring.Services) -> wiring.Services:
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(by_alias=True),
            "LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES),
            "LONGHAUL_BREAKER_FAILURES": "2",
        }
    )
    return dataclasses.replace(services, settings=settings)


@pytest.fixture(autouse=True)
def no_faults() -> Iterator[None]:
    yield
    faults.install(faults.FaultInjector())


def _calls(
    s: wiring.Services, *, tokens: int = 100_000, route: str | None = None, item: int | None = None
) -> ModelCalls:
    job = s.jobs.get_job(JOB)
    if job is None:
        job, _ = s.jobs.create_job(
            NewJob(
                job_id=JOB,
                tenant_id="tenant-a",
                workflow="document-analysis",
                input_key="k",
                payload_hash="h",
                model="m",
                estimated_sla_seconds=1,
                budget_tokens=tokens,
                budget_cost_micro=10_000_000,
                route=route,
            )
        )
        job = s.jobs.transition(JOB, JobStatus.RUNNING, event="job_started")  # its first step started
    return ModelCalls(s, job, "draft_answer", item, 1)


def _request(max_tokens: int = 100) -> ModelRequest:
    return ModelRequest(task="t", prompt_version="v7", system="s", prompt="p", context={}, max_tokens=max_tokens)


def _types(s: wiring.Services) -> list[str]:
    return [e.type for e in s.jobs.list_events(JOB, limit=200)[0]]


def test_a_valid_answer_is_one_call_recorded_with_route_model_and_prompt_version(gateway_services, models) -> None:
    calls = _calls(gateway_services)
    value, _ = calls.ask(_request(), Answer)
    assert value == Answer(answer="yes", score=0.5)
    [call] = calls.calls
    assert (call["route"], call["provider"], call["model_id"], call["prompt_version"]) == (
        "default", "offline", "primary", "v7"
    )  # fmt: skip
    assert _types(gateway_services).count("model_called") == 1
    job = gateway_services.jobs.get_job(JOB)
    assert job is not None and job.usage_input_tokens == 10 and job.spent_tokens == 15


def test_malformed_output_is_repaired_mechanically_without_another_call(gateway_services, models) -> None:
    models["primary"].script = [('Sure! ```json\n{"answer": "yes", "score": 0.5,\n```', "end_turn")]
    value, _ = _calls(gateway_services).ask(_request(), Answer)
    assert value.answer == "yes" and len(models["primary"].requests) == 1
    assert "output_repaired" in _types(gateway_services)


def test_a_wrong_shape_gets_a_feedback_retry_with_the_validation_errors(gateway_services, models) -> None:
    models["primary"].script = [('{"answer": "yes"}', "end_turn"), (GOOD, "end_turn")]
    value, _ = _calls(gateway_services).ask(_request(), Answer)
    assert value.score == 0.5
    first, retry = models["primary"].requests
    assert "score" in retry.prompt and "score" not in first.prompt
    types = _types(gateway_services)
    assert types.index("output_validation_failed") < types.index("feedback_retry")


def test_then_the_stronger_route_then_output_invalid(gateway_services, models) -> None:
    models["primary"].script = [("[1, 2]", "end_turn")]
    models["strong"].script = [(GOOD, "end_turn")]
    value, _ = _calls(gateway_services).ask(_request(), Answer)
    assert value.answer == "yes" and len(models["primary"].requests) == 2 and len(models["strong"].requests) == 1
    assert "escalated_to_stronger_route" in _types(gateway_services)


def test_every_rung_failing_is_output_invalid(gateway_services, models) -> None:
    models["primary"].script = [("[1, 2]", "end_turn")]
    models["strong"].script = [("[3]", "end_turn")]
    with pytest.raises(OutputInvalidError, match="still invalid"):
        _calls(gateway_services).ask(_request(), Answer)
    assert _types(gateway_services)[-1] == "output_invalid"


def test_a_truncated_answer_is_never_repaired_into_success(gateway_services, models) -> None:
    # the cut-off text happens to repair into a valid object: it must still not be accepted
    for name in ("primary", "strong"):
        models[name].script = [('{"answer": "yes", "score": 0.5', "max_tokens")]
    with pytest.raises(OutputInvalidError):
        _calls(gateway_services).ask(_request(), Answer)
    assert "output_repaired" not in _types(gateway_services)


def test_an_outage_fails_over_to_the_fallback_and_opens_the_breaker(gateway_services, models) -> None:
    models["primary"].script = [UpstreamUnavailableError("503")]
    for item in range(2):
        value, _ = _calls(gateway_services, item=item).ask(_request(), Answer)
        assert value.answer == "yes"
    types = _types(gateway_services)
    assert types.count("model_failover") == 2 and types.count("breaker_opened") == 1
    # while open, the primary is not called at all
    _calls(gateway_services, item=2).ask(_request(), Answer)
    assert len(models["primary"].requests) == 2 and len(models["backup"].requests) == 3


def test_without_a_fallback_an_open_breaker_fails_fast_as_upstream_unavailable(gateway_services, models) -> None:
    models["alone"].script = [UpstreamUnavailableError("503")]
    for item in range(2):
        with pytest.raises(UpstreamUnavailableError):
            _calls(gateway_services, route="alone", item=item).ask(_request(), Answer)
    with pytest.raises(UpstreamUnavailableError, match="circuit open"):
        _calls(gateway_services, route="alone", item=2).ask(_request(), Answer)
    assert len(models["alone"].requests) == 2


def test_a_call_that_does_not_fit_the_budget_is_never_made(gateway_services, models) -> None:
    calls = _calls(gateway_services, tokens=50)  # the worst case of one call is over 100 tokens
    with pytest.raises(BudgetExceededError):
        calls.ask(_request(), Answer)
    assert models["primary"].requests == [] and "budget_exceeded" in _types(gateway_services)
    # a second item of the same job fails fast too: the job is exhausted
    with pytest.raises(BudgetExceededError):
        _calls(gateway_services, item=1).ask(_request(max_tokens=1), Answer)
    assert models["primary"].requests == []


def test_a_rerun_of_the_same_call_is_answered_from_the_ledger_without_a_charge(gateway_services, models) -> None:
    _calls(gateway_services).ask(_request(), Answer)
    again = _calls(gateway_services)  # the same step delivered again (e.g. after a crash before its checkpoint)
    value, _ = again.ask(_request(), Answer)
    assert value.answer == "yes" and len(models["primary"].requests) == 1
    assert len(gateway_services.budgets.ledger(JOB)) == 1
    assert "model_call_reused" in _types(gateway_services)


def test_model_output_faults_spoil_the_answer_as_configured(gateway_services, models) -> None:
    faults.install(faults.FaultInjector("draft_answer=schema-invalid-outputx1"))
    value, _ = _calls(gateway_services).ask(_request(), Answer)
    assert value.answer == "yes" and "feedback_retry" in _types(gateway_services)


def test_truncated_output_fault_ends_output_invalid(gateway_services, models) -> None:
    faults.install(faults.FaultInjector("draft_answer=truncated-output"))
    with pytest.raises(OutputInvalidError):
        _calls(gateway_services).ask(_request(), Answer)


def test_model_fault_kinds_only_at_model_steps() -> None:
    with pytest.raises(ValueError, match="model steps"):
        faults.FaultInjector("parse_documents=refusal", REGISTRY)
    assert faults.FaultInjector("extract_evidence#2=malformed-outputx3", REGISTRY).faults[0].times == 3


def test_routes_are_checked() -> None:
    with pytest.raises(ValueError, match="base_url"):
        Route.model_validate({"provider": "openai", "model_id": "m"})


@pytest.mark.parametrize("status", [JobStatus.FAILED, JobStatus.CANCEL_REQUESTED, JobStatus.EXPIRED])
def test_no_call_starts_once_the_job_has_left_running(gateway_services, models, status: JobStatus) -> None:
    # Given an item still in flight whose job has just left `running` (another item's failure path, a cancel, the
    # sweep)
    calls = _calls(gateway_services)
    gateway_services.jobs.transition(JOB, status, event=f"job_{status.value}")

    # When the item's step asks the model
    with pytest.raises(CancelledError):
        calls.ask(_request(), Answer)

    # Then no call was made and nothing was reserved
    assert all(not m.requests for m in models.values())
    assert gateway_services.budgets.ledger(JOB) == []


def test_a_job_that_leaves_running_between_the_check_and_the_reservation_is_refused_by_it(
    gateway_services, models, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the job fails right after the gateway read it as running (the race the reservation's condition closes)
    calls = _calls(gateway_services)
    checked = ModelCalls._ensure_running

    def check_then_fail(self: ModelCalls) -> None:
        checked(self)
        gateway_services.jobs.transition(JOB, JobStatus.FAILED, event="job_failed")

    monkeypatch.setattr(ModelCalls, "_ensure_running", check_then_fail)

    # When the item's step asks the model
    with pytest.raises(CancelledError):
        calls.ask(_request(), Answer)

    # Then the reservation refused it: no call, no charge, nothing held on the job
    assert all(not m.requests for m in models.values())
    assert gateway_services.budgets.ledger(JOB) == []
    job = gateway_services.jobs.get_job(JOB)
    assert job is not None and not job.spent_tokens


class Counted(Scripted):
    """A scripted model with a token counter, as the offline model has: its prompts count 7 tokens."""

    def count_tokens(self, request: ModelRequest) -> int:
        return 7


def test_a_call_reserves_its_prompts_counted_tokens_plus_its_output_cap(gateway_services, models) -> None:
    models["primary"] = Counted("primary", [(GOOD, "end_turn")])
    calls = _calls(gateway_services)
    calls.ask(_request(max_tokens=300), Answer)
    [charge] = gateway_services.budgets.ledger(JOB)
    assert (charge.reserved_tokens, charge.reserved_output_tokens) == (7 + 300, 300)
    # without a counter, every byte of the prompt is a token (an upper bound of any byte-level tokenizer)
    models["primary"] = Scripted("primary", [(GOOD, "end_turn")])
    _calls(gateway_services, item=1).ask(_request(max_tokens=300), Answer)
    uncounted = gateway_services.budgets.ledger_item(JOB, "1/draft_answer/1")
    assert uncounted is not None and uncounted.reserved_tokens == len("s") + len("p") + 64 + 300


def test_a_cap_the_budget_lowered_is_sent_and_an_answer_cut_off_there_is_budget_exceeded(
    gateway_services, models
) -> None:
    # Given a job with 200 tokens left after a first call: a prompt of 7 and a cap of 200 no longer fit whole
    models["primary"] = Counted("primary", [(GOOD, "end_turn"), ('{"answer": "ye', "max_tokens")])
    calls = _calls(gateway_services, tokens=215)
    calls.ask(_request(max_tokens=200), Answer)  # 7 + 200 reserved, 15 settled
    # When the next call is made
    with pytest.raises(BudgetExceededError, match="cut off at the 193 output tokens left of the job's budget"):
        calls.ask(_request(max_tokens=200).model_copy(update={"prompt": "another"}), Answer)
    # Then it was sent with what was left as its cap, and its answer cut off there ends the step: no feedback retry
    assert [r.max_tokens for r in models["primary"].requests] == [200, 193]
    types = _types(gateway_services)
    assert "output_capped_by_budget" in types and "feedback_retry" not in types and types[-1] == "budget_exceeded"
    job = gateway_services.jobs.get_job(JOB)
    assert job is not None and job.budget_exhausted == "job" and job.spent_tokens <= 215
