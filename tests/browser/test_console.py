"""The console as its people use it, in headless Chromium: a reviewer approves a draft and its job completes, live on
the tenant's job page, which draws the job's workflow (its steps first, every state on request, no label clipped); an
operator replays a dead-lettered job after seeing the plan and edits a tenant's policy; a tenant sees only its own jobs
and no reviews or operations."""

from __future__ import annotations

import json
import re
from typing import Any

from playwright.sync_api import expect

from local.platform import LocalPlatform
from longhaul.api.graph import WorkflowGraph, derive, parse_definition
from longhaul.core import faults
from longhaul.core.contracts import JobStatus
from longhaul.core.ports import ExecutionStatus
from longhaul.workflows import REGISTRY
from tests.browser.conftest import Api, Tabs
from tests.infrastructure.conftest import workflow_level

# The longest review deadline: its first rung (a reminder at a third, time-scaled) comes long after the test.
REVIEW = {"review": {"mode": "always", "deadline_seconds": 43200}}


def node(page: Any, state: str) -> Any:
    return page.locator(f'svg .node[data-state="{state}"]')


def show_internal_states(page: Any, show: bool = True) -> None:
    page.get_by_label("Show internal states").set_checked(show)
    expect(page.locator(".graph-box svg")).to_have_attribute("data-view", "states" if show else "steps")


# Every node's outline and texts, and whether each text lies within its node's outline and the outline within the
# svg's viewBox (the svg is drawn at its viewBox's size, so client rectangles compare in one frame).
CLIPPED = """() => {
  const svg = document.querySelector('.graph-box svg');
  const [, , width, height] = svg.getAttribute('viewBox').split(' ').map(Number);
  const frame = svg.getBoundingClientRect();
  const problems = [];
  if (Math.abs(frame.width - width) > 0.5 || Math.abs(frame.height - height) > 0.5) problems.push('svg scaled');
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5
    && a.bottom <= b.bottom + 0.5;
  for (const node of svg.querySelectorAll('.node')) {
    const shapes = [...node.querySelectorAll(':scope > rect, :scope > polygon')];
    const outline = node.querySelector(':scope > .outline').getBoundingClientRect();
    for (const shape of shapes) {
      if (!inside(shape.getBoundingClientRect(), frame)) problems.push(`${node.dataset.state}: box outside the svg`);
    }
    for (const text of node.querySelectorAll('text')) {
      if (!inside(text.getBoundingClientRect(), outline)) {
        problems.push(`${node.dataset.state}: "${text.textContent}" outside its box`);
      }
    }
  }
  return problems;
}"""


def clipped(page: Any) -> list[str]:
    problems: list[str] = page.evaluate(CLIPPED)
    return problems


def test_a_reviewer_approves_the_draft_and_the_job_completes_live_on_its_page(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    job_id = alpha.submit(**REVIEW)
    waiting = alpha.wait(job_id, lambda j: j["status"] == "waiting_for_review", "to wait for review")
    review_id = waiting["review"]["review_id"]

    # The tenant follows the job: it waits in the review's task-token state.
    job_page = tabs.sign_in(keys["alpha"], f"/console/jobs/{job_id}")
    expect(job_page.locator(".job-head .badge")).to_have_text("waiting for review")
    expect(node(job_page, "review")).to_have_attribute("data-status", "waiting")  # its wait, folded into the step
    expect(node(job_page, "verify_citations")).to_have_attribute("data-status", "done")
    expect(node(job_page, "publish_result")).to_have_attribute("data-status", "pending")
    expect(node(job_page, "review: wait")).to_have_count(0)
    tabs.shoot(job_page, "job-waiting-for-review")
    show_internal_states(job_page)
    expect(node(job_page, "review: wait")).to_have_attribute("data-status", "waiting")
    show_internal_states(job_page, False)

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
    expect(node(job_page, "review")).to_have_attribute("data-status", "done")
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
    # Steps first: one node per step, in the spec's order down the main column, and the end; nothing else but a
    # segment's opening (its Parallel) and closing (its timer and end) around its steps.
    drawn = page.locator("svg .node").evaluate_all(
        "nodes => nodes.map((n) => [n.getBoundingClientRect().top, n.dataset.state]).sort((a, b) => a[0] - b[0])"
        ".map(([, state]) => state)"
    )
    expected = []
    for step in spec.step_names:
        segment = spec.segment_of(step)
        if segment is not None and step == segment.steps[0]:
            expected.append(f"segment {segment.name}")
        expected.append(step)
        if segment is not None and step == segment.steps[-1]:
            expected.append(segment.name)
    assert drawn == [*expected, "Job completed"]
    for step in spec.step_names:
        expect(node(page, step)).to_have_attribute("data-status", "skipped" if step in skipped else "done")
    expect(node(page, "parse_documents")).to_contain_text("2 of 2 documents")
    expect(node(page, "parse_documents")).to_have_attribute(
        "data-states", re.compile("parse_documents: any group failed")
    )
    expect(page.locator('.fanouts li[data-step="parse_documents"]')).to_contain_text("2 of 2 documents")
    assert clipped(page) == []

    # The states themselves, on request.
    show_internal_states(page)
    alone = {"build_index", "extract_evidence"}  # one batch, one passage group: an item's Task runs without a Map
    grouped = {"parse_documents"}  # two small documents: one group, whose Task runs without a Map
    for step in spec.step_names:  # every step's own state is drawn; those the job ran are done
        state = f"{step} (one item)" if step in alone else f"{step} (one group)" if step in grouped else step
        expect(node(page, state)).to_have_attribute("data-status", "skipped" if step in skipped else "done")
    expect(node(page, "build_index")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents (distributed)")).to_have_attribute("data-status", "skipped")
    expect(node(page, "parse_documents (one group)")).to_contain_text("2 of 2 documents")
    expect(node(page, "parse_documents: inline or distributed?")).to_have_attribute("data-status", "done")
    assert clipped(page) == []
    page.get_by_label("Also the failure path not taken").check()
    expect(node(page, "extract_evidence (one item): record failure")).to_have_attribute("data-status", "skipped")
    assert clipped(page) == []
    tabs.shoot(page, "job-page-internal-states")
    show_internal_states(page, False)
    expect(page.locator(".timeline li").last).to_contain_text("job_completed")
    # The answer's first citation, shown in its page's text.
    page.get_by_role("button", name="Source 1:").click()
    expect(page.locator("#source-view mark")).to_be_visible()
    quote = page.locator("#source-view mark").inner_text()
    assert quote and quote in page.locator("#source-view .page-text").inner_text()
    tabs.shoot(page, "job-page")


def test_every_workflows_graph_draws_its_steps_first_and_no_label_is_clipped(
    tabs: Tabs, platform: LocalPlatform, keys: dict[str, str]
) -> None:
    """Each deployed workflow's definition, drawn by the console's own graph module: folded, one node per step (and
    the states of no step); with its internal states, every state of the definition; never a text outside its box."""
    machines = platform.client("stepfunctions").list_state_machines()["stateMachines"]
    page = tabs.sign_in(keys["alpha"])
    for workflow, spec in sorted(REGISTRY.items()):
        asl = next(
            d
            for m in machines
            if (
                d := json.loads(
                    platform.client("stepfunctions").describe_state_machine(stateMachineArn=m["stateMachineArn"])[
                        "definition"
                    ]
                )
            ).get("Comment")
            == f"Longhaul workflow {workflow}"
        )
        definition = parse_definition(json.dumps(asl))
        nodes, edges = derive(
            definition,
            [],
            steps=spec.step_names,
            execution_status=ExecutionStatus.NOT_STARTED,
            job_status=JobStatus.QUEUED,
            segments=tuple(g.name for g in spec.segments),
        )
        for node in nodes:  # a child step's states link to the job it started (drawn beside its label, unclipped)
            node.child_job_id = "job_" + "c" * 28 if node.step in {c.name for c in spec.child_steps} else None
        graph = WorkflowGraph(
            job_id="job_drawn",
            workflow=workflow,
            job_status=JobStatus.QUEUED,
            execution="drawn",
            execution_status=ExecutionStatus.NOT_STARTED,
            start_at=definition.StartAt,
            nodes=nodes,
            edges=edges,
        ).model_dump(mode="json")
        for internal in (False, True):
            drawn = page.evaluate(
                """async ([graph, internal]) => {
                  const { renderGraph } = await import(new URL('assets/graph.js', document.baseURI).href);
                  const box = document.createElement('div');
                  box.className = 'graph-box';
                  box.append(renderGraph(graph, { internal, showAll: true }));
                  document.getElementById('main').replaceChildren(box);
                  return [...box.querySelectorAll('svg .node')].map((n) => n.dataset.state);
                }""",
                [graph, internal],
            )
            links = page.evaluate("() => document.querySelectorAll('svg a.child-link').length")
            assert (links > 0) == bool(spec.child_steps), (workflow, links)
            if internal:
                assert sorted(drawn) == sorted(workflow_level(asl["States"])), workflow  # a segment's too
            else:
                assert set(spec.step_names) <= set(drawn), workflow
                ends = [n.name for n in nodes if n.type == "Succeed" or (n.name == definition.StartAt and not n.step)]
                assert set(ends) <= set(drawn), workflow
                assert not any(":" in name and name.split(":")[0] in spec.step_names for name in drawn), drawn
            assert clipped(page) == [], (workflow, internal)
            tabs.shoot(page, f"{workflow}-{'states' if internal else 'steps'}")


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
    expect(page.get_by_role("navigation", name="Console").get_by_role("link")).to_have_text(
        ["Jobs", "Schedules & triggers"]
    )
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


def test_the_streamed_draft_resumes_from_its_last_event_id_without_repeats(
    tabs: Tabs, alpha: Api, keys: dict[str, str]
) -> None:
    """The page's own reading of Server-Sent Events, given a stream that drops after two deltas: it opens the stream
    again with `Last-Event-ID`, and a delta sent twice is shown once (the stream route itself is the platform's)."""
    job_id = alpha.submit(**REVIEW)
    alpha.wait(job_id, lambda j: j["status"] == "waiting_for_review", "to wait for review")

    def delta(seq: int, call: str, index: int, text: str) -> str:
        data = {"step": "draft_answer", "item": None, "call_id": call, "index": index, "text": text}
        return f"id: {seq}\nevent: output_delta\ndata: {json.dumps(data)}\n\n"

    asked: list[str | None] = []

    def stream(route: Any) -> None:
        asked.append(route.request.headers.get("last-event-id"))
        if len(asked) == 1:  # two pieces, then the connection drops (no `end`)
            body = ": open\n\n" + delta(1, "c1", 0, "The Supplier ") + delta(2, "c1", 1, "must delete ")
        else:  # resumed: the second piece again, the rest, the call's end, a second call, the stream's end
            body = (
                delta(2, "c1", 1, "must delete ")
                + delta(3, "c1", 2, "personal data.")
                + 'id: 4\nevent: call_finished\ndata: {"step": "draft_answer", "item": null, "call_id": "c1", '
                '"output_tokens": 9}\n\n' + delta(5, "c2", 0, "A second draft") + "id: 6\nevent: end\n\n"
            )
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)

    page = tabs.open(f"/console/jobs/{job_id}")
    page.route(f"**/v1/jobs/{job_id}/stream", stream)
    page.get_by_label("API key").fill(keys["alpha"])
    page.get_by_role("button", name="Sign in").click()

    expect(page.locator("#draft-stream .latest-call")).to_contain_text("A second draft")
    expect(page.locator('#draft-stream .call[data-call="c1"] .draft-text')).to_have_text(
        "The Supplier must delete personal data."
    )
    expect(page.locator('#draft-stream .call[data-call="c1"]')).to_contain_text("finished, 9 output tokens")
    expect(page.locator("#stream-state")).to_contain_text("The job has ended")
    assert asked == [None, "2"]  # opened again from the last id, and not after `end`
    tabs.shoot(page, "draft-resumed")
