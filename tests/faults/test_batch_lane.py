"""The batch lane under faults: the process dies after submitting the batch, the submission is delivered twice, and
items answered from the batch crash after settling or are delivered twice; the job answers as on demand, with every
call charged once and no item lost."""

from __future__ import annotations

from typing import Any

from local.platform import LocalPlatform
from tests.faults.helpers import assert_consistent, charges
from tests.workflows.conftest import Client


def test_crashes_and_duplicate_deliveries_around_a_batch_charge_no_call_twice_and_lose_no_item(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any], inject
) -> None:
    request = {**sample_request, "input": {**sample_request["input"], "passages_per_group": 1}}
    on_demand = alpha.submit({**request, "model_lane": "on_demand"})
    assert alpha.wait(on_demand)["status"] == "completed"
    # Given: the batch Task dies after submitting (and is retried), then is delivered twice; two items answered from
    # the batch die after settling their call, two are delivered twice
    inject(
        "extract_evidence=crash-after-side-effectx1,extract_evidence=duplicatex1,"
        "extract_evidence#0=crash-after-side-effectx1,extract_evidence#1=crash-after-side-effectx1,"
        "extract_evidence#2=duplicatex1,extract_evidence#3=duplicatex1"
    )
    batched = alpha.submit({**request, "model_lane": "batch"})
    job = alpha.wait(batched, timeout=180)
    assert job["status"] == "completed", job
    events = alpha.events(batched)
    assert_consistent(events)
    # Then one batch was submitted and finished, answering every record
    (submitted,) = [e for e in events if e["type"] == "model_batch_submitted"]
    (finished,) = [e for e in events if e["type"] == "model_batch_finished"]
    records = submitted["detail"]["records"]
    assert finished["detail"]["succeeded"] == records and finished["detail"]["on_demand_after"] == 0
    # And each item's call was charged once, in the batch lane (the redeliveries reused it)
    evidence = [c for c in charges(platform, batched) if c.get("step") == "extract_evidence"]
    assert len(evidence) == records and {c["status"] for c in evidence} == {"settled"}
    assert {c.get("lane") for c in evidence} == {"batch"}
    paid = [e for e in events if e["type"] == "model_called" and e["step"] == "extract_evidence"]
    assert sorted(e["item"] for e in paid) == list(range(records))
    # And the answer and the tokens are the on-demand job's
    results = [alpha.get(f"/v1/jobs/{job_id}/result").json() for job_id in (batched, on_demand)]
    assert results[0]["answer"] == results[1]["answer"] and results[0]["citations"] == results[1]["citations"]
    usage = [alpha.get(f"/v1/jobs/{job_id}").json()["cost"]["model"] for job_id in (batched, on_demand)]
    tokens = [(u["input_tokens"], u["output_tokens"]) for u in usage]
    assert tokens[0] == tokens[1]
