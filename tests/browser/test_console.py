"""The console as its people use it, in headless Chromium: a reviewer approves a draft and its job completes, live on
the tenant's job page, which draws the job's workflow; an operator replays a dead-lettered job after seeing the plan
and edits a tenant's policy; a tenant sees only its own jobs and no reviews or operations."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from longhaul.core import faults
from longhaul.workflows import REGISTRY
from tests.browser.conftest import Api, Tabs

# The longest review deadline: its first rung (a reminder at a third, time-scaled) comes long after the test.
REVIEW = {"review": {"mode": "always", "deadline_seconds": 43200}}


def node(page: Any, state: str) -> Any:
    return page.locator(f'svg .node[data-state="{state}"]')


def test_a_reviewer_approves_the_draft_and_the_job_completes_live_on_its_page(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    job_id = alpha.submit(**REVIEW)
    waiting = alpha.wait(job_id, lambda j: j["status"] == "waiting_for_review", "to wait for review")
    review_id = waiting["review"]["review_id"]

    # The tenant follows the job: it waits in the review's task-token state.
    job_page = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}")
    expect(job_page.locator(".job-head .badge")).to_have_text("waiting for review")
    expect(node(job_page, "review: wait")).to_have_attribute("data-status", "waiting")
    expect(node(job_page, "verify_citations")).to_have_attribute("data-status", "done")
    expect(node(job_page, "publish_result")).to_have_attribute("data-status", "pending")
    tabs.shoot(job_page, "job-waiting-for-review")

    # The reviewer finds it in the queue, opens it, tries an invalid edit, then approves.
    queue = tabs.sign_in(keys["alpha-reviewer"])
    expect(queue.get_by_role("heading", name="Reviews", exact=True)).to_be_visible()
    expect(queue.locator(f'tr[data-review="{review_id}"]')).to_contain_text("waiting · analysts")
    tabs.shoot(queue, "review-queue")
    queue.get_by_role("link", name=review_id).click()
    expect(queue.get_by_role("heading", name="Why review was asked")).to_be_visible()
    expect(queue.locator(".evidence li").first).to_contain_text("found on its page")
    queue.get_by_label("Comment (optional)").fill("checked the cap")
    queue.get_by_role("button", name="Edit", exact=True).click()
    queue.get_by_label("Answer", exact=True).fill("")
    queue.get_by_role("button", name="Publish edits").click()
    expect(queue.locator("#edit-answer-error")).to_contain_text("at least 1 character")
    expect(queue.get_by_label("Comment (optional)")).to_have_value("checked the cap")  # nothing is lost
    tabs.shoot(queue, "review-edit-refused")
    queue.get_by_role("button", name="Close the editor").click()
    # A second tab on the same review: its decision comes second.
    late = tabs.sign_in(keys["alpha-reviewer"], f"/console/reviews/{review_id}")
    queue.get_by_role("button", name="Approve").click()
    expect(queue.locator("#job-status")).to_contain_text("completed", timeout=120_000)
    tabs.shoot(queue, "review-approved")
    late.get_by_role("button", name="Approve").click()
    expect(late.get_by_role("alert")).to_contain_text(f"review {review_id} is already decided")

    # The tenant's page saw it through without a reload: the long-poll brought every event.
    expect(job_page.locator(".job-head .badge")).to_have_text("completed", timeout=120_000)
    expect(node(job_page, "Job completed")).to_have_attribute("data-status", "done", timeout=60_000)
    expect(node(job_page, "review: wait")).to_have_attribute("data-status", "done")
    expect(job_page.locator('.timeline li[data-type="review_decided"]')).to_have_count(1)
    tabs.shoot(job_page, "job-completed-after-review")


def test_the_job_page_draws_the_workflow_the_job_passed_through_and_its_result(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    job_id = alpha.submit()
    alpha.wait(job_id, lambda j: j["status"] == "completed", "to complete")
    spec = REGISTRY["document-analysis"]

    page = tabs.sign_in(keys["alpha"])
    expect(page.locator(f'tr[data-job="{job_id}"]')).to_contain_text("completed")
    page.get_by_role("link", name=job_id).click()
    expect(node(page, "Job completed")).to_have_attribute("data-status", "done")
    skipped = {"ocr_pages", "review"}  # the sample has no scanned page and asks for no review (a Choice passes it)
    alone = {"build_index", "extract_evidence"}  # one batch, one passage group: an item's Task runs without a Map
    grouped = {"parse_documents"}  # two small documents: one group, whose Task runs without a Map
    for step in spec.step_names:  # every step's own state is drawn; those the job ran are done
        state = f"{step} (one item)" if step in alone else f"{step} (one group)" if step in grouped else step
        expect(node(page, state)).to_have_attribute("data-status", "skipped" if step in skipped else "done")
    expect(node(page, "build_index")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents (distributed)")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents (one group)")).to_contain_text("2 of 2 documents")
    expect(page.locator('.fanouts li[data-step="parse_documents"]')).to_contain_text("2 of 2 documents")
    expect(page.locator(".timeline li").last).to_contain_text("job_completed")
    # The answer's first citation, shown in its page's text.
    page.get_by_role("button", name="Source 1:").click()
    expect(page.locator("#source-view mark")).to_be_visible()
    quote = page.locator("#source-view mark").inner_text()
    assert quote and quote in page.locator("#source-view .page-text").inner_text()
    tabs.shoot(page, "job-page")


def test_a_job_that_finishes_while_its_page_loads_is_shown_finished(
    tabs: Tabs, alpha: Api, alpha_reviewer: Api, keys: dict[str, str]
) -> None:
    """The page reads the job, then its events: a job that finishes between the two is read as unfinished, with its
    last event already on the page. The page must not go on asking for events after that one (a finished job's
    long-poll answers at once): it reads the job again and shows it finished."""
    job_id = alpha.submit(**REVIEW)
    waiting = alpha.wait(job_id, lambda j: j["status"] == "waiting_for_review", "to wait for review")
    held: list[Any] = []
    page = tabs.open(f"/console/jobs/{job_id}")
    # the page's first read of the events waits here until the job has finished
    page.route(lambda url: "/events?" in url and "wait=" not in url and not held, lambda route: held.append(route))
    page.get_by_label("API key").fill(keys["alpha"])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".job-head .badge")).to_have_text("waiting for review")
    for _ in range(300):
        if held:
            break
        page.wait_for_timeout(100)
    assert held, "the page did not read the job's events"
    alpha_reviewer.post(f"/v1/reviews/{waiting['review']['review_id']}/decision", {"decision": "approve"})
    alpha.wait(job_id, lambda j: j["status"] == "completed", "to complete")
    held[0].continue_()
    expect(page.locator(".job-head .badge")).to_have_text("completed")
    expect(page.locator('.timeline li[data-type="job_completed"]')).to_have_count(1)
    expect(page.locator("#live-state")).to_have_text("The job is completed.")


def test_an_operator_replays_a_dead_lettered_job_after_seeing_the_plan(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    faults.install(faults.FaultInjector("verify_citations=invalid-inputx1", REGISTRY))
    job_id = alpha.submit()
    alpha.wait(job_id, lambda j: j["status"] == "failed", "to fail")
    faults.install(faults.FaultInjector())

    page = tabs.sign_in(keys["ops"], "/console/ops/dead-letters")
    row = page.locator(f'tr[data-job="{job_id}"]')
    expect(row).to_contain_text("invalid-input")
    tabs.shoot(page, "dead-letters")
    row.get_by_role("button", name="Replay").click()
    page.get_by_label("Reason (recorded in the job’s events)").fill("the rule was fixed")
    page.get_by_role("button", name="Show plan").click()
    expect(page.locator(".plan")).to_contain_text("verify_citations → review → publish_result")
    expect(page.locator(".plan")).to_contain_text("Nothing has started yet")
    tabs.shoot(page, "replay-plan")
    assert alpha.get(f"/v1/jobs/{job_id}")["status"] == "failed"  # the plan started nothing
    page.get_by_role("button", name="Start replay").click()
    page.get_by_role("link", name="Open the job").click()
    expect(page.locator(".job-head .badge")).to_have_text("completed", timeout=120_000)
    expect(node(page, "verify_citations")).to_have_attribute("data-status", "done", timeout=60_000)
    expect(page.locator('.timeline li[data-type="job_replayed"]')).to_have_count(1)
    tabs.shoot(page, "replayed-job")


def test_an_operator_edits_a_tenant_policy_and_a_bad_value_is_named_at_its_field(
    tabs: Tabs, keys: dict[str, str]
) -> None:
    page = tabs.sign_in(keys["ops"])
    page.get_by_role("link", name="Tenant policies").click()
    page.get_by_label("Tenant", exact=True).fill("beta")
    page.get_by_role("button", name="Open").click()
    expect(page.get_by_role("heading", name="beta")).to_contain_text("the defaults")
    page.get_by_label("Weight (1–100)").fill("500")
    page.get_by_label("Jobs in flight").fill("7")
    page.get_by_role("button", name="Save policy").click()
    expect(page.locator("#policy-weight-error")).to_contain_text("less than or equal to 100")
    expect(page.get_by_label("Jobs in flight")).to_have_value("7")
    tabs.shoot(page, "policy-refused")
    page.get_by_label("Weight (1–100)").fill("5")
    page.get_by_role("button", name="Save policy").click()
    expect(page.get_by_role("status")).to_contain_text("Saved the policy of beta")
    page.reload()
    expect(page.get_by_role("heading", name="beta")).to_contain_text("its own policy")
    expect(page.get_by_label("Weight (1–100)")).to_have_value("5")


def test_a_tenant_sees_only_its_own_jobs_and_no_reviews_or_operations(
    tabs: Tabs, alpha: Api, beta: Api, keys: dict[str, str]
) -> None:
    theirs = beta.submit()
    mine = alpha.submit()

    page = tabs.open("/console")
    page.get_by_label("API key").press_sequentially(keys["alpha"])  # the keyboard alone signs in
    page.keyboard.press("Enter")
    expect(page.locator(f'tr[data-job="{mine}"]')).to_be_visible()
    expect(page.locator(f'tr[data-job="{theirs}"]')).to_have_count(0)
    expect(page.get_by_role("navigation", name="Console").get_by_role("link")).to_have_text(["Jobs"])
    tabs.shoot(page, "tenant-jobs")
    page.goto(f"{tabs.origin}/console/jobs/{theirs}")
    expect(page.get_by_role("alert")).to_contain_text(f"no job {theirs!r}")
    for path in ("/console/reviews", "/console/ops/dead-letters", "/console/ops/policies"):
        page.goto(tabs.origin + path)
        expect(page.get_by_role("heading", level=1)).to_have_text("Not available with this key")
    tabs.shoot(page, "tenant-no-operations")


def test_an_unknown_key_is_refused_at_sign_in(tabs: Tabs) -> None:
    page = tabs.open("/console/jobs")
    page.get_by_label("API key").fill("lh_not_a_key")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_role("alert")).to_have_text("This API key is not known here.")
    assert page.evaluate("() => sessionStorage.length") == 0
    tabs.shoot(page, "sign-in-refused")
