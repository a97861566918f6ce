"""Provenance: every checkpoint and every model call names the code version and the workflow version that produced
it; the first step of an execution records on its job which state machine version it runs; the exact request and the
raw response of each model call are kept under their hashes, and operators list a job's calls and read them.

The runner and the gateway run on the stores on moto with the fake engine; the operator routes through the API
function.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

import pytest

from longhaul import services as wiring
from longhaul.core.contracts import JobStatus
from longhaul.core.llm import ModelRequest, ModelResponse, Usage
from longhaul.core.records import Provenance
from longhaul.core.routes import Route
from longhaul.core.settings import Settings
from longhaul.core.step_events import StepEvent
from longhaul.engine.context import StepContext
from longhaul.engine.runner import run_step
from longhaul.guardrails.gateway import ModelCalls
from longhaul.storage.artifacts import prompt_key, response_key
from longhaul.storage.jobs import JobStore, NewJob
from tests.unit.conftest import CallApi
from tests.unit.fakes import FakeEngine
from tests.unit.step_support import JOB_ID, SPEC, WORKFLOW, FakeWork, current, job, step_event

__all__ = ["job"]  # the fixture
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:Longhaul-local-document-analysis"
CODE = "1a2b3c4d5e6f7a8b"
API_JOB = "job_" + "c" * 28  # a job id the API accepts


@pytest.fixture
def versioned(services: wiring.Services, engine: FakeEngine) -> wiring.Services:
    """The services of a deployed code version, whose workflow's alias routes to version 3 of its machine."""
    settings = Settings.model_validate(
        {
            **services.settings.model_dump(by_alias=True),
            "LONGHAUL_WORKFLOWS": json.dumps({WORKFLOW: f"{MACHINE}:live"}),
            "LONGHAUL_CODE_VERSION": CODE,
        }
    )
    engine.current[WORKFLOW] = f"{MACHINE}:3"
    return dataclasses.replace(services, settings=settings)


def execution_of(engine: FakeEngine, name: str = JOB_ID) -> str:
    engine.start(WORKFLOW, name, {})
    return f"{MACHINE.replace(':stateMachine:', ':execution:')}:{name}"


@pytest.mark.usefixtures("job")
def test_the_first_step_records_the_version_its_execution_runs_and_every_checkpoint_names_both_versions(
    versioned: wiring.Services, engine: FakeEngine, store: JobStore
) -> None:
    # Given a job whose execution started through the alias (on version 3)
    execution = execution_of(engine)

    # When its first step runs, then the deploy moves the alias on, then its second step runs
    run_step({**step_event("a"), "execution": execution}, versioned, work=FakeWork(), spec=SPEC)
    engine.current[WORKFLOW] = f"{MACHINE}:4"
    last = FakeWork({"result_key": f"results/{JOB_ID}/result.json"})
    run_step({**step_event("b"), "execution": execution}, versioned, work=last, spec=SPEC)

    # Then the job records the version it started on, and both checkpoints name it and the code version
    assert current(store).state_machine_version == f"{MACHINE}:3"
    assert current(store).view().workflow_version == 3
    for step in ("a", "b"):
        record = versioned.checkpoints.get_step(JOB_ID, step)
        assert record is not None
        assert (record.code_version, record.workflow_version) == (CODE, 3), step


@pytest.mark.usefixtures("job")
def test_without_a_versioned_engine_a_checkpoint_still_names_its_code_version(services: wiring.Services) -> None:
    run_step(step_event("a"), services, work=FakeWork(), spec=SPEC)

    record = services.checkpoints.get_step(JOB_ID, "a")
    assert record is not None and (record.code_version, record.workflow_version) == ("unversioned", None)


# ---------------------------------------------------------------------- model calls


class Echo:
    model_id = "echo-1"

    def generate(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(
            text=json.dumps({"said": request.prompt}), usage=Usage(input_tokens=7, output_tokens=3),
            model_id=self.model_id, stop_reason="end_turn",
        )  # fmt: skip


@pytest.fixture
def echo(monkeypatch: pytest.MonkeyPatch) -> Echo:
    model = Echo()

    def adapter(route: Route) -> Echo:
        return model

    adapter.cache_clear = lambda: None  # type: ignore[attr-defined]  # as the real one's lru_cache has
    monkeypatch.setattr(wiring, "_adapter", adapter)
    return model


def budgeted_job(s: wiring.Services, job_id: str = JOB_ID) -> Any:
    created, _ = s.jobs.create_job(
        NewJob(
            job_id=job_id, tenant_id="tenant-a", workflow=WORKFLOW, input_key=f"work/{job_id}/input.json",
            payload_hash="h", model="m", estimated_sla_seconds=1, budget_tokens=100_000, budget_cost_micro=10_000_000,
        )
    )  # fmt: skip
    # a mid-job step: the job runs (the gateway refuses a call for a job that is not running)
    return s.jobs.transition(job_id, JobStatus.RUNNING, event="job_started") or created


REQUEST = ModelRequest(
    task="draft", prompt_version="v9", system="You answer.", prompt="What is the cap? Passage: liability…",
    context={}, max_tokens=64,
)  # fmt: skip


def test_a_model_call_names_its_versions_and_keeps_its_exact_prompt_and_raw_response(
    versioned: wiring.Services, echo: Echo
) -> None:
    calls = ModelCalls(
        versioned, budgeted_job(versioned), "draft_answer", None, 1, provenance=Provenance(code_version=CODE,
        workflow_version=3),
    )  # fmt: skip

    response = calls.text(REQUEST)

    [call] = calls.calls
    assert (call["code_version"], call["workflow_version"]) == (CODE, 3)
    assert call["prompt_hash"] == REQUEST.prompt_hash()
    assert call["response_hash"] == hashlib.sha256(response.text.encode()).hexdigest()
    [event] = [e for e in versioned.jobs.list_events(JOB_ID, limit=50)[0] if e.type == "model_called"]
    assert (event.detail["code_version"], event.detail["workflow_version"]) == (CODE, 3)
    kept_prompt = versioned.artifacts.get_json(prompt_key(JOB_ID, call["prompt_hash"]))
    assert (kept_prompt["system"], kept_prompt["prompt"], kept_prompt["prompt_version"]) == (
        REQUEST.system, REQUEST.prompt, "v9"
    )  # fmt: skip
    kept_response = versioned.artifacts.get_json(response_key(JOB_ID, call["response_hash"]))
    assert kept_response["text"] == response.text and kept_response["prompt_hash"] == REQUEST.prompt_hash()
    [charge] = versioned.budgets.ledger(JOB_ID)
    assert (charge.prompt_hash, charge.response_hash) == (call["prompt_hash"], call["response_hash"])
    assert (charge.code_version, charge.workflow_version) == (CODE, 3)


def test_a_step_context_gives_its_calls_the_runners_provenance(versioned: wiring.Services, echo: Echo) -> None:
    job = budgeted_job(versioned)
    event = StepEvent.model_validate(step_event("draft_answer"))

    ctx = StepContext(event, versioned, job=job, provenance=Provenance(code_version="c1"))

    ctx.model().text(REQUEST)

    assert ctx.model_calls[0]["code_version"] == "c1" and ctx.model_calls[0]["workflow_version"] is None


# ---------------------------------------------------------------------- the operators' view


def test_operators_list_a_jobs_calls_and_read_the_exact_prompt_and_response(
    call_api: CallApi, operator_key: str, api_keys: dict[str, str], services: wiring.Services, echo: Echo
) -> None:
    job = budgeted_job(services, API_JOB)
    ModelCalls(services, job, "draft_answer", None, 1, provenance=Provenance(code_version=CODE)).text(REQUEST)

    listed = call_api("GET", f"/v1/ops/jobs/{API_JOB}/calls", key=operator_key)

    assert listed.status == 200, listed.raw_body
    [call] = listed.body["calls"]
    assert (call["step"], call["route"], call["model_id"], call["prompt_version"]) == (
        "draft_answer", "default", services.settings.model_id, "v9"
    )  # fmt: skip
    assert (call["input_tokens"], call["output_tokens"], call["status"], call["code_version"]) == (
        7,
        3,
        "settled",
        CODE,
    )
    prompt_link, response_link = call["links"]["prompt"], call["links"]["response"]
    assert prompt_link.endswith(f"/v1/ops/jobs/{API_JOB}/prompts/{REQUEST.prompt_hash()}")
    prompt = call_api("GET", prompt_link[prompt_link.index("/v1/") :], key=operator_key)
    response = call_api("GET", response_link[response_link.index("/v1/") :], key=operator_key)
    assert prompt.status == 200 and prompt.body["prompt"] == REQUEST.prompt
    assert response.status == 200 and json.loads(response.body["text"]) == {"said": REQUEST.prompt}
    tenant_key = next(iter(api_keys.values()))
    assert call_api("GET", f"/v1/ops/jobs/{API_JOB}/calls", key=tenant_key).status == 403
    missing = call_api("GET", f"/v1/ops/jobs/{API_JOB}/prompts/{'0' * 64}", key=operator_key)
    assert missing.status == 404 and missing.content_type == "application/problem+json"
