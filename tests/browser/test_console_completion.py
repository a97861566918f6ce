"""The console's manual completion, in headless Chromium: an operator hands a failed job to a person from its page; a
reviewer writes its result in the review's page, sees a refusal listed where it is, then completes the job."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from longhaul.core import faults
from longhaul.workflows import REGISTRY
from tests.browser.conftest import Api, Tabs


def test_an_operator_hands_a_failed_job_to_a_person_who_completes_it_in_the_review_page(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    faults.install(faults.FaultInjector("publish_result=invalid-input", REGISTRY))
    job_id = alpha.submit()
    alpha.wait(job_id, lambda j: j["status"] == "failed", "to fail")
    faults.install(faults.FaultInjector())

    # The operator hands it to a person from the failed job's page.
    ops = tabs.sign_in(keys["ops"], f"/console/jobs/{job_id}")
    ops.get_by_role("button", name="Hand to a person…").click()
    ops.get_by_label("Reviewers’ group").fill("analysts")
    ops.get_by_label("Note for them (recorded in the job’s events)").fill("the last step failed; publish the answer")
    ops.get_by_role("button", name="Open the review").click()
    expect(ops.get_by_role("status").filter(has_text="is open for analysts")).to_be_visible()
    review_id = alpha.get(f"/v1/jobs/{job_id}")["review"]["review_id"]
    tabs.shoot(ops, "handed-to-a-person")

    # The reviewer's page has the job's verified draft as JSON; a misquoted citation is refused where it is.
    page = tabs.sign_in(keys["alpha-reviewer"], f"/console/reviews/{review_id}")
    box = page.get_by_label("Result (JSON)")
    draft: dict[str, Any] = json.loads(box.input_value())
    assert draft["claims"] and draft["answer"]
    wrong = json.loads(json.dumps(draft))
    wrong["claims"][0]["citations"][0]["quote"] = "words that are on no page of these documents"
    box.fill(json.dumps(wrong, indent=2))
    page.get_by_role("button", name="Complete the job with this result").click()
    expect(page.locator("#complete-problems")).to_contain_text("claims.0.citations.0")
    expect(page.get_by_role("alert")).to_contain_text("the review stays open")
    tabs.shoot(page, "completion-refused")

    box.fill(json.dumps(draft, indent=2))
    page.get_by_role("button", name="Complete the job with this result").click()
    expect(page.locator(".ok")).to_contain_text("completed", timeout=60_000)
    tabs.shoot(page, "completed-by-a-person")
    assert alpha.get(f"/v1/jobs/{job_id}/result")["completed_by"] == "person"
