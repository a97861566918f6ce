"""The console's repair actions in a real browser: an operator fixes a failed job's input (a 422 shown at its place in
the input, then a saved version and a replay from the first step it invalidated) and escalates the job, then clears
the escalation."""

from __future__ import annotations

from playwright.sync_api import expect

from longhaul.core import faults
from longhaul.workflows import REGISTRY
from tests.browser.conftest import Api, Tabs


def test_an_operator_fixes_a_failed_jobs_input_replays_it_and_escalates_it(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    faults.install(faults.FaultInjector("verify_citations=invalid-inputx1", REGISTRY))
    job_id = alpha.submit()
    alpha.wait(job_id, lambda j: j["status"] == "failed", "to fail")
    faults.install(faults.FaultInjector())
    page = tabs.sign_in(keys["ops"], f"/console/jobs/{job_id}")
    expect(page.locator(".job-head .badge")).to_have_text("failed")

    # A question too short is refused, the error listed under the input at its path
    page.get_by_role("button", name="Fix input…").click()
    text = page.locator('textarea[name="input"]')
    expect(text).to_contain_text('"question"')
    edited = text.input_value()
    question = next(line for line in edited.splitlines() if '"question"' in line)
    text.fill(edited.replace(question, '  "question": "",'))
    page.get_by_label("Reason (recorded with your name in the input’s version and the job’s events)").fill(
        "a clearer question"
    )
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.locator('.fix-input-form li[data-loc="input.question"]')).to_be_visible()
    expect(text).to_have_attribute("aria-invalid", "true")
    tabs.shoot(page, "fix-input-refused")

    # A valid question is saved as version 2, and the replay it offers starts at the first step that reads it
    text.fill(edited.replace(question, '  "question": "What notice does termination need?",'))
    page.get_by_role("button", name="Save as a new version").click()
    expect(page.locator(".fix-input-form")).to_contain_text("Input version 2 saved; changed: question.")
    tabs.shoot(page, "fix-input-saved")
    page.get_by_role("button", name="Replay from retrieve_passages…").click()
    expect(page.locator(".replay-form select[name=from_step]")).to_have_value("retrieve_passages")
    page.locator(".replay-form input[name=reason]").fill("input fixed")
    page.get_by_role("button", name="Show plan").click()
    expect(page.locator(".plan")).to_contain_text("runs from retrieve_passages")
    page.get_by_role("button", name="Start replay").click()
    expect(page.locator(".job-head .badge")).to_have_text("completed", timeout=120_000)
    assert alpha.get(f"/v1/jobs/{job_id}")["input_version"] == 2

    # An escalation is shown on the page, and cleared
    page.get_by_role("button", name="Escalate…").click()
    page.get_by_label("Note (what to look at; sent to the alarm topic)").fill("the verifier refused a good citation")
    page.get_by_role("button", name="Escalate", exact=True).click()
    expect(page.locator("#escalation")).to_contain_text("the verifier refused a good citation")
    tabs.shoot(page, "escalated")
    page.get_by_role("button", name="Clear escalation").click()
    expect(page.locator("#escalation")).to_have_count(0)
    assert alpha.get(f"/v1/jobs/{job_id}")["escalation"] is None
