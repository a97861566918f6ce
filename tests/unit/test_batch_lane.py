"""The batch lane's domain (`longhaul.guardrails.batch`) on moto: when a step batches, what its submission reserves
and writes, how a batch's outputs settle through the items' own gateway, and that a crash or a second delivery at
any point (after submit, after completion, while reading outputs) charges no call twice and loses no item.

Bedrock's batch jobs and the task tokens are fakes of their ports; the outputs are written where Bedrock writes them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from longhaul import services as wiring
from longhaul.core import faults
from longhaul.core.budgets import Price, cost_micro, price_of, price_table
from longhaul.core.llm import ModelRequest, ModelResponse, Usage
from longhaul.core.records import Job
from longhaul.core.routes import Route
from longhaul.core.settings import Settings
from longhaul.guardrails import batch
from longhaul.guardrails.gateway import ModelCalls
from tests.unit.step_support import running_job

JOB = "job_batch_1"
STEP = "extract_evidence"
ROLE = "arn:aws:iam::123456789012:role/batch"
ROUTES = {"default": {"provider": "offline", "model_id": "primary"}}


class Answer(BaseModel):
    answer: str


def _good(item: int) -> str:
    return json.dumps({"answer": f"item {item}"})


class Scripted:
    """The on-demand model: answers `{"answer": "item <n>"}` for the prompt `p<n>`, and counts its calls."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.requests: list[ModelRequest] = []

    def generate(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        item = int(request.prompt.split()[0][1:])
        return ModelResponse(
            text=_good(item), usage=Usage(input_tokens=10, output_tokens=5), model_id=self.model_id, stop_reason="x"
        )


class FakeBatchJobs:
    """Bedrock's batch jobs: submissions (idempotent by client token), statuses, stops."""

    def __init__(self) -> None:
        self.submitted: list[dict[str, str]] = []
        self.statuses: dict[str, str] = {}
        self.stopped: list[str] = []

    def submit(self, **fields: str) -> str:
        arn = f"arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/{fields['client_token'][-12:]}"
        if fields["client_token"] not in {s["client_token"] for s in self.submitted}:
            self.submitted.append(fields)
        self.statuses.setdefault(arn, "InProgress")
        return arn

    def status(self, arn: str) -> str:
        return self.statuses[arn]

    def stop(self, arn: str) -> None:
        self.stopped.append(arn)
        self.statuses[arn] = "Stopped"


class FakeTokens:
    def __init__(self) -> None:
        self.resumed: list[tuple[str, Mapping[str, Any]]] = []

    def succeed(self, token: str, output: Mapping[str, Any]) -> bool:
        self.resumed.append((token, output))
        return True

    def fail(self, token: str, *, error: str, cause: str = "") -> bool:
        return True


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    scripted = Scripted("primary")

    def adapter(route: Route) -> Scripted:
        return scripted

    adapter.cache_clear = lambda: None  # type: ignore[attr-defined]  # as the real one's lru_cache has
    monkeypatch.setattr(wiring, "_adapter", adapter)
    return scripted


@pytest.fixture
def s(services: wiring.Services, model: Scripted) -> wiring.Services:
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(by_alias=True),
            "LONGHAUL_MODEL_ROUTES": json.dumps(ROUTES),
            "LONGHAUL_BATCH_ROLE": ROLE,
            "LONGHAUL_BATCH_MIN_RECORDS": "2",
        }
    )
    return dataclasses.replace(services, settings=settings, tokens=FakeTokens(), batch_jobs=FakeBatchJobs())


@pytest.fixture(autouse=True)
def no_faults() -> Iterator[None]:
    yield
    faults.install(faults.FaultInjector())


def _job(s: wiring.Services, **fields: Any) -> Job:
    job = s.jobs.get_job(JOB)
    if job is None:
        job = running_job(
            s.jobs, JOB, budget_tokens=1_000_000, budget_cost_micro=100_000_000, sla_class="batch", **fields
        )
    return job


def _request(item: int) -> ModelRequest:
    return ModelRequest(task="t", prompt_version="v1", system="s", prompt=f"p{item} q", context={}, max_tokens=50)


def _captured(s: wiring.Services, items: range) -> list[tuple[int, batch.Captured]]:
    """Each item's first call, as the items' own capturing gateway captures it."""
    found = []
    for item in items:
        calls = ModelCalls(s, _job(s), STEP, item, 1, capturing=True)
        with pytest.raises(batch.Captured) as captured:
            calls.ask(_request(item), Answer)
        found.append((item, captured.value))
    return found


def _submit(s: wiring.Services, items: range = range(3), token: str = "token-1") -> batch.Submitted:
    return batch.submit(s, s.batch_jobs, _job(s), STEP, token, _captured(s, items), role_arn=ROLE)


def _record(s: wiring.Services) -> batch.BatchRecord:
    found = batch.BatchStore(s.jobs.table).get(JOB, STEP, 1)
    assert found is not None
    return found


def _bedrock_writes(s: wiring.Services, answered: Mapping[int, str]) -> None:
    """What Bedrock writes when the job ends: `<output>/<job id>/records.jsonl.out`, one line per record (an error
    line for a record it could not answer, a missing line for one it never reached)."""
    record = _record(s)
    assert record.batch_arn is not None
    base = batch.prefix(JOB, STEP, 1)
    lines = [
        {
            "recordId": batch.record_id(item),
            "modelInput": {},
            "modelOutput": {
                "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 10, "outputTokens": 5},
            },
        }
        for item, text in answered.items()
    ]
    lines.append({"recordId": "ITEM9999999", "modelInput": {}, "error": {"errorCode": 400, "errorMessage": "x"}})
    job_part = record.batch_arn.rsplit("/", 1)[-1]
    body = "\n".join(json.dumps(line) for line in lines).encode()
    s.artifacts.put_bytes(f"{base}/output/{job_part}/{batch.RECORDS_FILE}.out", body)


def _types(s: wiring.Services) -> list[str]:
    return [e.type for e in s.jobs.list_events(JOB, limit=500)[0]]


def _price(s: wiring.Services) -> Price:
    return price_of("primary", price_table(s.settings.model_prices))


# ---------------------------------------------------------------------------------------------------------- lane


def test_a_step_calls_on_demand_below_the_minimum_of_records_or_too_near_its_deadline(s) -> None:
    job = _job(s)
    policy = batch.BatchPolicy(min_records=100, min_window_seconds=3600)
    now = s.now()
    reason = batch.on_demand_reason
    assert reason(job, 100, now, policy, provider="bedrock", role_configured=True) is None
    assert "minimum of 100" in str(reason(job, 99, now, policy, provider="bedrock", role_configured=True))
    assert "no batch inference" in str(reason(job, 100, now, policy, provider="openai", role_configured=True))
    assert "role" in str(reason(job, 100, now, policy, provider="bedrock", role_configured=False))
    busy = reason(job, 100, now, policy, provider="bedrock", role_configured=True, in_progress=20)
    assert "in progress" in str(busy)
    near = job.model_copy(update={"deadline_at": now + timedelta(minutes=30)})
    assert "deadline" in str(reason(near, 100, now, policy, provider="bedrock", role_configured=True))


def test_the_batch_lane_is_asked_for_or_the_batch_class_default() -> None:
    base = {"job_id": "j", "tenant_id": "t", "workflow": "w", "status": "queued", "input_key": "k"}
    base |= {"created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z", "model": "m"}
    base |= {"version": 1, "event_seq": 1, "payload_hash": "h", "estimated_sla_seconds": 1, "execution_name": "j"}
    lanes = {
        (sla, lane): Job.model_validate({**base, "sla_class": sla, "model_lane": lane}).initial_state().model_lane
        for sla in ("interactive", "batch")
        for lane in ("auto", "on_demand", "batch")
    }
    assert lanes == {
        ("interactive", "auto"): "on_demand",
        ("interactive", "on_demand"): "on_demand",
        ("interactive", "batch"): "batch",
        ("batch", "auto"): "batch",
        ("batch", "on_demand"): "on_demand",
        ("batch", "batch"): "batch",
    }


def test_too_few_records_resume_the_wait_at_once_on_demand(s) -> None:
    # Given two items, below a minimum of three
    s = dataclasses.replace(
        s, settings=Settings.model_validate({**s.settings.model_dump(by_alias=True), "LONGHAUL_BATCH_MIN_RECORDS": 3})
    )
    outcome = _submit(s, range(2))
    # Then nothing is submitted or reserved, the log says why and the wait resumes
    assert outcome.lane == "on_demand" and "minimum of 3" in str(outcome.reason)
    assert s.batch_jobs.submitted == [] and s.budgets.ledger(JOB) == []
    assert s.tokens.resumed == [("token-1", {"lane": "on_demand"})]
    assert "model_batch_skipped" in _types(s)


# ---------------------------------------------------------------------------------------------------------- batch


def test_submission_reserves_each_record_at_the_batch_price_and_writes_one_record_per_item(s) -> None:
    outcome = _submit(s)
    assert outcome.lane == "batch" and outcome.records == 3
    [submitted] = s.batch_jobs.submitted
    assert submitted["role_arn"] == ROLE and submitted["model_id"] == "primary"
    assert submitted["input_uri"].endswith(f"{batch.prefix(JOB, STEP, 1)}/input/")
    lines = s.artifacts.get_bytes(f"{batch.prefix(JOB, STEP, 1)}/input/{batch.RECORDS_FILE}").decode().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["recordId"] for r in records] == [batch.record_id(i) for i in range(3)]
    assert records[0]["modelInput"]["messages"][0]["content"][0]["text"] == "p0 q"
    # (a structured answer's schema is said in words: a batch in Converse's shape takes no tool use)
    schema = _request(0).model_copy(update={"response_schema": Answer.model_json_schema()})
    assert "JSON schema" in batch.model_input(schema, "bedrock")["system"][0]["text"]
    assert "longhaulRequest" not in batch.model_input(schema, "bedrock")  # (only the offline model reads it)
    ledger = s.budgets.ledger(JOB)
    assert [(c.charge_id, c.status, c.lane) for c in ledger] == [
        (f"1/{STEP}/{i}", "reserved", "batch") for i in range(3)
    ]
    # (the prompt as counted, and its output cap, at half the on-demand price)
    held = ledger[0]
    assert held.reserved_cost_micro == cost_micro(held.reserved_tokens - 50, 50, _price(s).in_lane("batch"))
    (event,) = [e for e in s.jobs.list_events(JOB, limit=100)[0] if e.type == "model_batch_submitted"]
    assert event.detail == {"step": STEP, "records": 3, "batch_id": _record(s).batch_arn}
    assert s.tokens.resumed == []  # it waits


def test_the_batch_answers_settle_at_the_batch_price_and_a_missing_one_is_called_on_demand(s, model) -> None:
    # Given a batch of three records, of which Bedrock answered two
    _submit(s)
    _bedrock_writes(s, {0: _good(0), 2: _good(2)})
    # When its completion arrives
    summary = batch.finish(s, _record(s))
    # Then the wait resumes, the log says what came back, and the unanswered record's reservation is released
    assert summary == {"records": 3, "succeeded": 2, "failed": 1, "on_demand_after": 1}
    assert s.tokens.resumed == [("token-1", {"lane": "batch"})]
    (finished,) = [e for e in s.jobs.list_events(JOB, limit=100)[0] if e.type == "model_batch_finished"]
    assert finished.detail == {"step": STEP, "records": 3, "succeeded": 2, "failed": 1, "on_demand_after": 1}
    # When the items run
    answers = [ModelCalls(s, _job(s), STEP, item, 1).ask(_request(item), Answer)[0] for item in range(3)]
    # Then every item has its answer: two from the batch, one on demand
    assert answers == [Answer(answer=f"item {i}") for i in range(3)]
    assert [r.prompt for r in model.requests] == ["p1 q"]
    ledger = {c.charge_id: c for c in s.budgets.ledger(JOB)}
    assert {c.lane for c in ledger.values()} == {"batch", "on_demand"}
    assert ledger[f"1/{STEP}/1"].lane == "on_demand"
    batch_price = _price(s).in_lane("batch")
    for item in (0, 2):
        charge = ledger[f"1/{STEP}/{item}"]
        assert (charge.status, charge.lane, charge.cost_micro) == ("settled", "batch", cost_micro(10, 5, batch_price))
    assert ledger[f"1/{STEP}/1"].cost_micro == cost_micro(10, 5, _price(s))
    job = s.jobs.get_job(JOB)
    assert job is not None and job.usage_input_tokens == 30 and job.spent_tokens == 45  # nothing else held


def test_an_answer_that_fails_validation_climbs_the_ladder_on_demand(s, model) -> None:
    _submit(s, range(2))
    _bedrock_writes(s, {0: "not json at all", 1: _good(1)})
    batch.finish(s, _record(s))
    calls = ModelCalls(s, _job(s), STEP, 0, 1)
    value, _ = calls.ask(_request(0), Answer)
    assert value == Answer(answer="item 0")
    assert [c.get("lane", "on_demand") for c in calls.calls] == ["batch", "on_demand"]  # the feedback rung
    assert len(model.requests) == 1


# ---------------------------------------------------------------------------------------------------------- faults


def test_a_second_delivery_of_the_submission_submits_nothing_again_and_waits_on_its_new_token(s) -> None:
    _submit(s, token="token-1")
    _submit(s, token="token-2")  # the Task retried after a crash past the submission: a new token
    assert len(s.batch_jobs.submitted) == 1
    assert _record(s).token == "token-2" and s.tokens.resumed == []
    assert len(s.budgets.ledger(JOB)) == 3
    # (and once the batch finished, a late delivery resumes its own wait at once)
    _bedrock_writes(s, {0: _good(0), 1: _good(1), 2: _good(2)})
    batch.finish(s, _record(s))
    _submit(s, token="token-3")
    assert s.tokens.resumed[-1] == ("token-3", {"lane": "batch"})


def test_a_crash_while_reading_outputs_or_a_duplicate_completion_charges_nothing_twice(s, model, monkeypatch) -> None:
    _submit(s)
    _bedrock_writes(s, {0: _good(0), 1: _good(1)})
    # Given a finish that dies after keeping the first answer
    original = s.artifacts.put_json
    kept: list[str] = []

    def dies_after_one(key: str, value: Any) -> str:
        if "/answers/" in key and kept:
            raise RuntimeError("crash while reading outputs")
        kept.append(key)
        return original(key, value)

    monkeypatch.setattr(s.artifacts, "put_json", dies_after_one)
    with pytest.raises(RuntimeError):
        batch.finish(s, _record(s))
    monkeypatch.setattr(s.artifacts, "put_json", original)
    assert s.tokens.resumed == []  # not resumed: the scheduled check finishes it
    # When the check runs (the batch ended), and the completion event arrives as well, twice
    s.batch_jobs.statuses[str(_record(s).batch_arn)] = "Completed"
    assert batch.check(s, s.batch_jobs) == 1
    for _ in range(2):
        batch.on_state_change(s, s.batch_jobs, {"batchJobName": _record(s).name, "status": "Completed"})
    # Then it finished once, and every item is answered once: the third on demand
    assert _types(s).count("model_batch_finished") == 1
    for item in range(3):
        for _ in range(2):  # a duplicate delivery of each item reuses its settled call
            ModelCalls(s, _job(s), STEP, item, 1).ask(_request(item), Answer)
    assert [r.prompt for r in model.requests] == ["p2 q"]
    ledger = s.budgets.ledger(JOB)
    assert sorted((c.charge_id, c.status) for c in ledger) == [(f"1/{STEP}/{i}", "settled") for i in range(3)]
    job = s.jobs.get_job(JOB)
    assert job is not None and job.usage_input_tokens == 30 and job.usage_output_tokens == 15


def test_a_batch_still_running_at_the_deadline_reserve_is_stopped_and_its_records_called_on_demand(s, model) -> None:
    # Given a job whose deadline's reserve is reached while its batch runs
    _job(s, deadline_at=(s.now() + timedelta(hours=2)).isoformat(), deadline_seconds=7200)
    _submit(s)
    assert batch.check(s, s.batch_jobs) == 0  # still within its time: left running
    s.jobs.clock.advance(timedelta(hours=2) - timedelta(seconds=899))
    # When the scheduled check runs
    assert batch.check(s, s.batch_jobs) == 1
    # Then the batch is stopped, its reservations given back, the wait resumed, and the items call on demand
    assert s.batch_jobs.stopped == [_record(s).batch_arn]
    assert {c.status for c in s.budgets.ledger(JOB)} == {"released"}
    assert s.tokens.resumed == [("token-1", {"lane": "batch"})]
    for item in range(3):
        ModelCalls(s, _job(s), STEP, item, 1).ask(_request(item), Answer)
    assert len(model.requests) == 3
    assert {c.lane for c in s.budgets.ledger(JOB)} == {"on_demand"}


def test_a_record_reads_back_from_bedrocks_output_line() -> None:
    line = {
        "recordId": "ITEM0000004",
        "modelInput": {},
        "modelOutput": {
            "output": {"message": {"content": [{"text": "{"}, {"text": "}"}]}},
            "stopReason": "max_tokens",
            "usage": {"inputTokens": 7, "outputTokens": 3},
        },
    }
    rid, answer, error = batch.parse_output_line(line, "m")
    assert (rid, error) == ("ITEM0000004", None)
    assert answer is not None and (answer.text, answer.stop_reason, answer.usage.input_tokens) == (
        "{}",
        "max_tokens",
        7,
    )
    rid, answer, error = batch.parse_output_line({"recordId": "X", "error": {"errorCode": 400}}, "m")
    assert answer is None and "400" in str(error)


def test_a_retried_submission_racing_the_batchs_end_resumes_its_own_wait(s) -> None:
    # Given a submission whose process died after its record, before submitting
    s_failing = dataclasses.replace(s, batch_jobs=None)
    outcome = batch.submit(s_failing, None, _job(s), STEP, "token-1", _captured(s, range(3)), role_arn=ROLE)
    assert outcome.lane == "on_demand"  # (no batch client: nothing submitted, the wait resumed)
    assert s.batch_jobs.submitted == []
    s.tokens.resumed.clear()
    for charge in s.budgets.ledger(JOB):
        s.budgets.release(JOB, charge.charge_id)
    store = batch.BatchStore(s.jobs.table)
    record = batch.BatchRecord(
        job_id=JOB, step=STEP, attempt=1, name=batch.batch_name(JOB, STEP, 1), token="token-1", route="default",
        model_id="primary", records=3, submitted_at="2026-01-01T00:00:00Z",
    )  # fmt: skip
    store.put(record)
    s.artifacts.put_json(batch.requests_key(JOB, STEP, 1), [])
    # When the retried Task arrives with its own token
    _submit(s, token="token-2")
    # Then it submits the batch (once) and waits on its token; the batch's end resumes that token
    assert len(s.batch_jobs.submitted) == 1 and _record(s).batch_arn is not None
    assert _record(s).token == "token-2" and _record(s).status == "submitted"
    batch.finish(s, _record(s))
    assert s.tokens.resumed == [("token-2", {"lane": "batch"})]
