"""Scenario: an invoice-reconciliation job fails at its last step; an operator hands it to a person, whose result
is refused while its total does not add up and accepted once it does; the job completes `completed_by: person`."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import requests

from local.platform import LocalPlatform
from tests.workflows.conftest import SAMPLES, Client

INVOICES = SAMPLES / "invoices"


def test_a_failed_job_is_completed_by_a_person_whose_totals_must_add_up(
    platform: LocalPlatform, alpha: Client, inject: Callable[[str], None]
) -> None:
    ops, reviewer = Client(platform, "ops"), Client(platform, "alpha-reviewer")
    contract, invoice = INVOICES / "contract_price_list.txt", INVOICES / "inv_01_northwind.txt"
    inject("publish_report=invalid-input")
    job_id = alpha.submit(
        {
            "workflow": "invoice-reconciliation",
            "input": {
                "contract": {"name": contract.name, "text": contract.read_text()},
                "invoices": [{"name": invoice.name, "text": invoice.read_text()}],
            },
        }
    )
    assert alpha.wait(job_id)["status"] == "failed"
    inject("")
    ask = {"assignee_group": "accounts-payable", "note": "publishing failed; the checks are done, write the report"}

    # Given an operator hands the failed job to a person (asked twice: the same review)
    assert alpha.post(f"/v1/ops/jobs/{job_id}/manual-completion", ask).status_code == 403
    opened = ops.post(f"/v1/ops/jobs/{job_id}/manual-completion", ask)
    again = ops.post(f"/v1/ops/jobs/{job_id}/manual-completion", ask)
    assert opened.status_code == 201, opened.text
    assert again.status_code == 200 and again.json()["review_id"] == opened.json()["review_id"]
    review_id = opened.json()["review_id"]
    review = reviewer.get(f"/v1/reviews/{review_id}").json()
    assert review["kind"] == "complete" and review["note"] == ask["note"]
    draft = review["draft"]  # the job's checked invoice, as its last step would have published it
    assert [i["document"] for i in draft["invoices"]] == [invoice.name]

    # When the person's total does not add up, it is refused and the review stays open
    wrong = copy.deepcopy(draft)
    wrong["invoices"][0]["totals"]["total"] = "775.24"
    refused = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "complete", "result": wrong})
    assert refused.status_code == 422, refused.text
    locs = [e["loc"] for e in refused.json()["errors"]]
    assert ["body", "result", "invoices", 0, "totals", "total"] in locs
    assert reviewer.get(f"/v1/reviews/{review_id}").json()["status"] == "pending"
    assert alpha.get(f"/v1/jobs/{job_id}").json()["status"] == "failed"

    # Then a result that adds up completes the job, once
    done = reviewer.post(
        f"/v1/reviews/{review_id}/decision", {"decision": "complete", "result": draft, "comment": "checked by hand"}
    )
    assert done.status_code == 200, done.text
    assert done.json()["job_status"] == "completed"
    twice = reviewer.post(f"/v1/reviews/{review_id}/decision", {"decision": "complete", "result": draft})
    assert twice.status_code == 409
    job = alpha.get(f"/v1/jobs/{job_id}").json()
    result: dict[str, Any] = alpha.get(f"/v1/jobs/{job_id}/result").json()
    assert job["status"] == "completed" and job["error"] is None
    assert result["completed_by"] == "person"
    assert result["completion"]["review_id"] == review_id and result["completion"]["comment"] == "checked by hand"
    assert result["invoices"][0]["status"] == "matched" and result["invoices"][0]["extractor"] == "person"
    rendered = requests.get(
        f"{alpha.base}/v1/jobs/{job_id}/result", headers={**alpha.headers, "Accept": "text/markdown"}, timeout=30
    )
    assert rendered.status_code == 200 and "# Invoice reconciliation" in rendered.text
    events = [e["type"] for e in alpha.events(job_id)]
    assert "manual_completion_requested" in events and events[-1] == "job_completed_by_person"
