"""The MCP server's tools (`longhaul.api.mcp`): a job's status as an MCP task status, the tools each role sees and
their schemas, and a bounded wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from longhaul.api.mcp import MAX_WAIT_SECONDS, McpTools, task_state, tool_specs
from longhaul.core.auth import Principal
from longhaul.core.contracts import JobStatus, JobView, Progress, ReviewSummary, WaitState

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
TENANT = Principal(tenant_id="alpha", role="tenant", key_id="k1")
REVIEWER = Principal(tenant_id="alpha", role="reviewer", key_id="k2")
WORKFLOWS = ["document-analysis", "invoice-reconciliation"]


def view(status: JobStatus, **fields: Any) -> JobView:
    return JobView(
        job_id="job_1",
        tenant_id="alpha",
        workflow="document-analysis",
        status=status,
        progress=Progress(),
        model="offline:test",
        created_at=NOW,
        updated_at=NOW,
        **fields,
    )


@pytest.mark.parametrize(
    ("status", "state"),
    [
        (JobStatus.QUEUED, "working"),
        (JobStatus.RUNNING, "working"),
        (JobStatus.RETRYING, "working"),
        (JobStatus.CANCEL_REQUESTED, "working"),
        (JobStatus.COMPLETED, "completed"),
        (JobStatus.FAILED, "failed"),
        (JobStatus.EXPIRED, "failed"),
        (JobStatus.CANCELLED, "cancelled"),
    ],
)
def test_a_job_status_maps_to_its_task_status(status: JobStatus, state: str) -> None:
    assert task_state(view(status)) == (state, None)


def test_a_review_a_pause_and_a_signal_wait_are_input_required_naming_what_is_awaited() -> None:
    review = ReviewSummary(review_id="rev_9", since=NOW, deadline=NOW + timedelta(hours=1), assignee_group="analysts")
    signal = WaitState(reason="signal", detail="approval from finance")
    rate_limited = WaitState(reason="rate_limited", detail="429")

    assert task_state(view(JobStatus.WAITING_FOR_REVIEW, review=review)) == (
        "input_required",
        "review rev_9 by analysts",
    )
    assert task_state(view(JobStatus.PAUSED)) == ("input_required", "a resume (POST /v1/jobs/job_1/resume)")
    assert task_state(view(JobStatus.RUNNING, waiting=signal)) == ("input_required", "a signal: approval from finance")
    assert task_state(view(JobStatus.RUNNING, waiting=rate_limited)) == ("working", None)


def test_a_reviewer_key_sees_only_the_review_tools_and_a_tenant_key_none_of_them() -> None:
    reviewer = [spec.name for spec in tool_specs(REVIEWER, WORKFLOWS)]
    tenant = [spec.name for spec in tool_specs(TENANT, WORKFLOWS)]

    assert reviewer == ["list_reviews", "get_review", "decide_review"]
    assert tenant == [*WORKFLOWS, "get_job", "wait_job", "get_result", "list_jobs", "cancel_job"]


def test_a_workflow_tools_schema_is_its_job_request_without_workflow() -> None:
    (spec,) = [s for s in tool_specs(TENANT, ["document-analysis"]) if s.name == "document-analysis"]
    schema = spec.input_schema

    assert schema["type"] == "object" and schema["required"] == ["input"]
    assert "workflow" not in schema["properties"]
    assert {"input", "budget", "review", "idempotency_key", "wait_seconds"} <= set(schema["properties"])
    assert schema["properties"]["wait_seconds"]["maximum"] == MAX_WAIT_SECONDS
    assert not spec.read_only and "document-analysis" in spec.description


def test_an_undeployed_workflow_has_no_tool() -> None:
    names = {spec.name for spec in tool_specs(TENANT, ["document-analysis"])}
    assert "invoice-reconciliation" not in names


class _Jobs:
    """A job that is running for `running` looks, then waits for its review."""

    def __init__(self, running: int) -> None:
        self.looks = 0
        self.running = running

    def view(self, _principal: Principal, _job_id: str) -> JobView:
        self.looks += 1
        if self.looks > self.running:
            return view(JobStatus.WAITING_FOR_REVIEW)
        return view(JobStatus.RUNNING)


def _tools(jobs: _Jobs) -> tuple[McpTools, list[float]]:
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    tools = McpTools(None, TENANT, "http://api", sleep=sleep, clock=lambda: now[0])  # type: ignore[arg-type]
    tools.jobs = jobs  # type: ignore[assignment]
    return tools, now


def test_a_wait_ends_when_the_job_needs_input() -> None:
    tools, now = _tools(_Jobs(running=3))

    found = tools._wait("job_1", 10)

    assert found.status == JobStatus.WAITING_FOR_REVIEW and now[0] == pytest.approx(0.6)


def test_a_wait_is_bounded() -> None:
    tools, now = _tools(_Jobs(running=1000))

    found = tools._wait("job_1", 2)

    assert found.status == JobStatus.RUNNING and now[0] == pytest.approx(2)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"wait_seconds": 21}, "wait_seconds"),
        ({"wait_seconds": "soon"}, "wait_seconds"),
        ({"wait_seconds": True}, "wait_seconds"),
        ({"idempotency_key": 7}, "idempotency_key"),
        ({"input": {"question": "?"}, "surprise": 1}, "surprise"),
    ],
)
def test_a_workflow_call_out_of_its_schema_is_a_tool_error_naming_the_field(
    arguments: dict[str, Any], field: str
) -> None:
    settings = SimpleNamespace(workflows=WORKFLOWS, mcp_wait_seconds=5)
    tools = McpTools(SimpleNamespace(settings=settings), TENANT, "http://api")  # type: ignore[arg-type]

    answer = tools.call("document-analysis", arguments)

    assert answer.is_error and answer.structured["status"] == 422
    assert any(error["loc"][0] == field for error in answer.structured["errors"]), answer.structured


def test_a_tool_the_key_does_not_see_is_not_found() -> None:
    settings = SimpleNamespace(workflows=WORKFLOWS, mcp_wait_seconds=5)
    as_reviewer = McpTools(SimpleNamespace(settings=settings), REVIEWER, "http://api")  # type: ignore[arg-type]

    answer = as_reviewer.call("document-analysis", {"input": {}})

    assert answer.is_error and answer.structured["status"] == 404
