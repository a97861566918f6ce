"""The console's operator actions on many jobs and on one, in headless Chromium: a bulk replay by error kind (dry run,
then execute) from the job list, and a job terminated from its page with a message its owner then reads there; and a
tenant finds its job by a word of its question."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.sync_api import expect

from longhaul.core import faults
from longhaul.workflows import REGISTRY
from tests.browser.conftest import Api, Tabs


def test_an_operator_replays_in_bulk_and_terminates_a_job_whose_owner_reads_the_message(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M")
    faults.install(faults.FaultInjector("draft_answer=invalid-inputx1", REGISTRY))
    wrong = [
        alpha.submit(input={**alpha_input(), "question": f"Which notice period applies, case {n}?"}) for n in (1, 2)
    ]
    for job_id in wrong:
        alpha.wait(job_id, lambda j: j["status"] == "failed", "to fail")
    faults.install(faults.FaultInjector("verify_citations=invalid-input", REGISTRY))
    hopeless = alpha.submit(input={**alpha_input(), "question": "Who signed the missing annex?"})
    alpha.wait(hopeless, lambda j: j["status"] == "failed", "to fail")
    faults.install(faults.FaultInjector())

    # The operator's job list: a bulk replay of tenant alpha's invalid-input failures since the test began
    page = tabs.sign_in(keys["ops"], "/console/jobs")
    page.get_by_text("Bulk actions").click()
    page.get_by_label("Tenant").last.fill("alpha")
    page.get_by_label("Error kind").fill("invalid-input")
    page.get_by_label("Failed at step").fill("draft_answer")
    page.get_by_label("Changed since (UTC)").fill(since)
    page.get_by_role("button", name="Dry run").click()
    result = page.locator("#bulk-result")
    expect(result).to_contain_text("Nothing was changed")
    expect(result.locator('td[data-outcome="would_replay"]')).to_have_count(2)
    tabs.shoot(page, "bulk-dry-run")
    assert alpha.get(f"/v1/jobs/{wrong[0]}")["status"] == "failed"
    page.get_by_role("button", name="Execute on 2 job(s)").click()
    expect(result.locator('td[data-outcome="replayed"]')).to_have_count(2)
    for job_id in wrong:
        alpha.wait(job_id, lambda j: j["status"] == "completed", "to complete")

    # The job that cannot be helped: the operator ends it with a message
    page.goto(page.url.split("/console")[0] + f"/console/jobs/{hopeless}")
    page.get_by_role("button", name="Terminate…").click()
    page.get_by_label("Ends as").select_option("failed")
    page.get_by_label("Reason (recorded in the job’s events, with you)").fill("no annex in the documents")
    message = "The annex you asked about is not among the documents; please send it and submit again."
    page.get_by_label("Message its owner reads (at most 1,000 characters)").fill(message)
    page.get_by_role("button", name="Terminate the job").click()
    expect(page.locator(".alert", has_text=message)).to_be_visible()
    tabs.shoot(page, "terminated-job")

    # Its owner finds the job by a word of its question and reads the message on its page
    owner = tabs.sign_in(keys["alpha"], "/console/jobs?q=annex")
    row = owner.locator(f'tr[data-job="{hopeless}"]')
    expect(row).to_be_visible()
    expect(owner.locator("tbody tr")).to_have_count(1)
    row.get_by_role("link").click()
    expect(owner.locator(".alert", has_text=message)).to_be_visible()


def alpha_input() -> dict[str, object]:
    import json

    from tests.browser.conftest import SAMPLES

    loaded: dict[str, object] = json.loads((SAMPLES / "request.json").read_text())["input"]
    return loaded
