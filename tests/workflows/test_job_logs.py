"""Scenario: every log line of a whole job's work names the job (seed 003's fields). The job retries a fan-out item,
gets an invalid model answer once (a second call), waits for a review a person decides, and sends its webhooks; every
line its steps, its review lane and its webhook deliveries write carries `job_id`, `trace_id` (derived from the
correlation id), `correlation_id`, and, for a step, `step`, `attempt`, `workflow_version` (and `item` for a fan-out's
item); lines written during a model call carry `model`, `route` and `prompt_version`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from local.deploy import wait_until
from local.platform import LocalPlatform
from longhaul.core.correlation import trace_id_for
from longhaul.core.observability import logger as handlers_logger
from longhaul.workflows import REGISTRY
from tests.unit.receiver import receiver
from tests.workflows.conftest import Client
from tests.workflows.test_review_and_webhooks import allow, reviewer, status_of

__all__ = ["allow", "reviewer"]  # the fixtures this module uses


class _Records(logging.Handler):
    """The handlers' log lines, as JSON objects, formatted as they are written."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(handlers_logger.registered_formatter)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(json.loads(self.format(record)))


@pytest.fixture
def records() -> Iterator[list[dict[str, Any]]]:
    handler = _Records()
    handlers_logger.addHandler(handler)
    yield handler.records
    handlers_logger.removeHandler(handler)


def test_every_line_of_a_jobs_steps_lanes_and_webhooks_names_the_job(
    platform: LocalPlatform,
    alpha: Client,
    reviewer: Client,
    allow: Any,
    inject: Callable[[str], None],
    records: list[dict[str, Any]],
    sample_request: dict[str, Any],
) -> None:
    inject("extract_evidence#0=transientx1,draft_answer=schema-invalid-outputx1")
    with receiver() as hook:
        allow(hook)
        job_id = alpha.submit(
            {**sample_request, "review": {"mode": "always"}, "callback_url": f"{hook.origin}/longhaul"},
            **{"X-Request-Id": "logs-scenario-1"},
        )
        review_id = status_of(alpha, job_id, "waiting_for_review")["review"]["review_id"]
        assert reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "approve"}).status_code == 200
        job = alpha.wait(job_id)
        wait_until(
            lambda: alpha.get(f"/v1/jobs/{job_id}").json()["callback"]["status"] == "delivered" or None,
            timeout=60,
            what="the webhook to be delivered",
        )
    assert job["status"] == "completed"
    events = [e["type"] for e in alpha.events(job_id)]
    assert "step_attempt_failed" in events and "feedback_retry" in events  # a step retried, a model call again
    correlation_id = job["correlation_id"]
    assert correlation_id == "logs-scenario-1"

    steps = set(REGISTRY[job["workflow"]].step_names)
    fan_outs = {s.name for s in REGISTRY[job["workflow"]].steps if s.over}
    mine = [r for r in records if r.get("job_id") == job_id or r.get("correlation_id") == correlation_id]
    lanes = [r for r in mine if _kind(r) != "other"]
    assert {_kind(r) for r in lanes} >= {"step", "review", "webhook"}, {r.get("function_name") for r in mine}
    for record in lanes:
        where = f"{record.get('function_name')}: {record.get('message')!r}"
        assert record.get("job_id") == job_id, where
        assert record.get("correlation_id") == correlation_id, where
        assert record.get("trace_id") == trace_id_for(correlation_id), where
        if _kind(record) == "webhook":
            assert isinstance(record.get("attempt"), int), where
            continue
        assert record.get("step") in steps, where
        assert isinstance(record.get("workflow_version"), int), where
        if _kind(record) == "step":
            assert isinstance(record.get("attempt"), int), where
            if record["step"] in fan_outs:
                assert isinstance(record.get("item"), int), where
        if "model" in record:
            assert record.get("route") and record.get("prompt_version"), where


def _kind(record: dict[str, Any]) -> str:
    """Which function wrote the line: a step's, the review lane's, a webhook delivery's (or another: the API's)."""
    name = str(record.get("function_name", ""))
    if "-Webhooks" in name:
        return "webhook"
    if "reviewlane" in name:
        return "review"
    return "step" if "-Workflows" in name else "other"
