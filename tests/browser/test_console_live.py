"""A live job on its console page, against the routes of a job you can watch and steer: the draft streamed as the model
writes it (`GET …/stream`), the provisional result until the final one (`GET …/result?provisional=true`), the wait
state, and Pause / Resume / Update for a tenant and an operator.

These tests need the platform's streaming, provisional-result, wait-state and pause/resume/update routes: on a
checkout without them the console leaves those parts out (which `test_console.py` relies on) and these tests fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from local.platform import LocalPlatform
from tests.browser.conftest import TIME_SCALE, Api, Tabs

REVIEW = {"review": {"mode": "always", "deadline_seconds": 43200}}
TERMINAL = {"completed", "failed", "cancelled", "expired"}


@pytest.fixture
def real_pace(platform: LocalPlatform) -> Iterator[None]:
    """The local waits at their real length, so that a job runs long enough to be watched and steered."""
    platform.set_time_scale(1.0)
    try:
        yield
    finally:
        platform.set_time_scale(TIME_SCALE)


def badge(page: Any) -> Any:
    return page.locator(".job-head .badge")


def test_the_draft_streams_onto_the_page_and_the_provisional_result_gives_way_to_the_final_one(
    tabs: Tabs, alpha: Api, alpha_reviewer: Api, keys: dict[str, str]
) -> None:
    job_id = alpha.submit(**REVIEW)
    waiting = alpha.wait(job_id, lambda j: j["status"] == "waiting_for_review", "to wait for review")
    provisional = alpha.get(f"/v1/jobs/{job_id}/result?provisional=true")
    assert provisional["provisional"] is True

    page = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}")
    # What the job waits on, said plainly.
    expect(page.locator("#wait-state")).to_have_attribute("data-reason", "review")
    # The draft's text, from the stream, grouped by call.
    draft = page.locator('#draft-stream .call[data-step="draft_answer"] .draft-text')
    expect(draft).not_to_be_empty()
    # The provisional result, marked, with the step it is as of.
    expect(page.locator("#provisional-note")).to_contain_text(f"as of step {provisional['as_of_step']}")
    expect(page.locator('section[aria-labelledby="result-heading"] .answer')).to_have_text(provisional["answer"])
    tabs.shoot(page, "provisional-and-draft")

    alpha_reviewer.post(f"/v1/reviews/{waiting['review']['review_id']}/decision", {"decision": "approve"})
    expect(badge(page)).to_have_text("completed", timeout=120_000)
    final = alpha.get(f"/v1/jobs/{job_id}/result")
    assert final["provisional"] is False
    expect(page.locator("#provisional-note")).to_have_count(0)
    expect(page.locator("#final-note")).to_contain_text("replaced the provisional one")
    expect(page.locator('section[aria-labelledby="result-heading"] .answer')).to_have_text(final["answer"])
    expect(page.locator("#wait-state")).to_have_count(0)
    expect(page.locator("#stream-state")).to_contain_text("The job has ended", timeout=60_000)  # the stream's `end`
    tabs.shoot(page, "final-result")


def test_a_tenant_pauses_and_updates_a_running_job_and_an_operator_resumes_it(
    tabs: Tabs, alpha: Api, keys: dict[str, str], real_pace: None
) -> None:
    job_id = alpha.submit()
    page = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}")
    expect(badge(page)).to_have_text(re.compile("queued|running|retrying"))

    # The model's words arrive in pieces while the job runs.
    latest = page.locator("#draft-stream .latest-call .draft-text")
    expect(latest).not_to_be_empty(timeout=120_000)
    assert alpha.get(f"/v1/jobs/{job_id}")["status"] not in TERMINAL

    page.get_by_role("button", name="Pause").click()
    expect(badge(page)).to_have_text("paused", timeout=60_000)
    expect(page.locator("#wait-state")).to_have_attribute("data-reason", "paused")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.locator('.timeline li[data-type="job_paused"]')).to_have_count(1)
    tabs.shoot(page, "paused")

    # Update: a budget above the tenant's ceiling is named at its field, nothing is changed; then a deadline and
    # instructions are taken.
    page.get_by_role("button", name="Update…").click()
    page.get_by_label("Budget: tokens").fill("999999999999")
    page.get_by_role("button", name="Update job").click()
    expect(page.locator("#update-max_tokens-error")).not_to_be_empty()
    expect(page.locator('.timeline li[data-type="job_updated"]')).to_have_count(0)
    tabs.shoot(page, "update-refused")
    page.get_by_label("Budget: tokens").fill("")
    page.get_by_label("Deadline (seconds from now)").fill("3600")
    page.get_by_label("Instructions (up to 4,000 characters)").fill("Quote the clause numbers.")
    page.get_by_role("button", name="Update job").click()
    expect(page.locator(".update-form .ok")).to_contain_text("deadline seconds, instructions")
    expect(page.locator('.timeline li[data-type="job_updated"]')).to_have_count(1)

    # An operator finds the paused job and resumes it from the operators' routes.
    ops = tabs.sign_in(keys["ops"], f"/console/jobs/{job_id}")
    expect(badge(ops)).to_have_text("paused")
    ops.get_by_role("button", name="Resume").click()
    expect(ops.get_by_role("button", name="Pause")).to_be_visible(timeout=60_000)
    expect(badge(page)).to_have_text("completed", timeout=180_000)
    expect(page.locator('.timeline li[data-type="job_resumed"]')).to_have_count(1)
    expect(page.get_by_role("button", name="Resume")).to_have_count(0)
    tabs.shoot(page, "resumed-and-completed")


def test_pausing_a_paused_job_shows_the_refusal_beside_the_buttons(
    tabs: Tabs, alpha: Api, keys: dict[str, str], real_pace: None
) -> None:
    job_id = alpha.submit()
    # The second tab does not hear of the job's events until released (its long-polls are held, as on a slow network),
    # so it still offers Pause once the first tab has paused the job.
    held: list[Any] = []
    released = False

    def hold_long_polls(route: Any) -> None:
        if "wait=" in route.request.url and not released:
            held.append(route)
        else:
            route.continue_()

    pattern = f"**/v1/jobs/{job_id}/events*"
    first = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}")
    second = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}", route=(pattern, hold_long_polls))
    expect(second.get_by_role("button", name="Pause")).to_be_visible()
    first.get_by_role("button", name="Pause").click()
    expect(badge(first)).to_have_text("paused", timeout=60_000)
    second.get_by_role("button", name="Pause").click()
    refusal = second.locator(".steer-problem")
    expect(refusal).to_be_visible()
    expect(refusal).to_contain_text("paused")
    # Released, the tab follows the job again and catches up.
    released = True
    for route in held:
        route.continue_()
    expect(badge(second)).to_have_text("paused", timeout=60_000)
    second.get_by_role("button", name="Resume").click()
    expect(badge(first)).to_have_text(re.compile("running|retrying|completed|waiting for review"), timeout=60_000)
