"""The batch lane on the local platform: a `batch`-class job's evidence extraction runs as one batch inference job
(the in-memory Bedrock runs the offline model over its records) and answers as the same job on demand, cheaper; a
job whose deadline is too near calls on demand."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tests.workflows.conftest import Client


def _request(sample_request: dict[str, Any], **fields: Any) -> dict[str, Any]:
    # One passage per group: 16 records, above the test platform's minimum of records per batch.
    return {**sample_request, "input": {**sample_request["input"], "passages_per_group": 1}, **fields}


def _of(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_a_batch_class_job_batches_its_evidence_calls_and_answers_as_the_same_job_on_demand(
    alpha: Client, sample_request
):
    # Given the same request, once on demand and once in the batch class (`model_lane` auto)
    on_demand = alpha.submit(_request(sample_request, sla_class="batch", model_lane="on_demand"))
    batched = alpha.submit(_request(sample_request, sla_class="batch"))
    # When both finish
    jobs = {job_id: alpha.wait(job_id, timeout=180) for job_id in (on_demand, batched)}
    assert all(job["status"] == "completed" for job in jobs.values()), jobs
    assert jobs[batched]["model_lane"] == "auto" and jobs[on_demand]["model_lane"] == "on_demand"

    # Then the batch-class job sent its evidence calls as one batch, which answered every record
    events = alpha.events(batched)
    (submitted,) = _of(events, "model_batch_submitted")
    assert submitted["step"] == "extract_evidence"
    assert submitted["detail"]["step"] == "extract_evidence" and submitted["detail"]["batch_id"]
    records = submitted["detail"]["records"]
    assert records >= 2
    (finished,) = _of(events, "model_batch_finished")
    assert finished["detail"] == {
        "step": "extract_evidence",
        "records": records,
        "succeeded": records,
        "failed": 0,
        "on_demand_after": 0,
    }
    evidence_calls = [e for e in _of(events, "model_called") if e["step"] == "extract_evidence"]
    assert len(evidence_calls) == records and all(e["detail"].get("lane") == "batch" for e in evidence_calls)
    # (the job on demand made no batch)
    assert not _of(alpha.events(on_demand), "model_batch_submitted")

    # And both give the same answer, with the same citations
    results = {job_id: alpha.get(f"/v1/jobs/{job_id}/result").json() for job_id in jobs}
    assert results[batched]["answer"] == results[on_demand]["answer"]
    assert results[batched]["citations"] == results[on_demand]["citations"]

    # And the same tokens cost less in the batch lane
    costs = {job_id: alpha.get(f"/v1/jobs/{job_id}").json()["cost"]["model"] for job_id in jobs}
    assert costs[batched]["input_tokens"] == costs[on_demand]["input_tokens"]
    assert Decimal(costs[batched]["usd"]) < Decimal(costs[on_demand]["usd"])


def test_a_batch_lane_job_whose_deadline_is_too_near_calls_on_demand(alpha: Client, sample_request):
    # Given a job that asks for the batch lane with a deadline nearer than a batch needs
    job_id = alpha.submit(_request(sample_request, model_lane="batch", deadline_seconds=120))
    # When it finishes
    job = alpha.wait(job_id, timeout=120)
    assert job["status"] == "completed", job
    # Then its evidence was extracted on demand, and the log says why
    events = alpha.events(job_id)
    assert not _of(events, "model_batch_submitted")
    (skipped,) = _of(events, "model_batch_skipped")
    assert skipped["step"] == "extract_evidence" and "deadline" in skipped["detail"]["reason"]
