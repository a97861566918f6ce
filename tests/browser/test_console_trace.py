"""A job's trace on its console page, drawn from a given trace: the job page reads the real job from the local platform,
while its trace (`GET /v1/jobs/{id}/trace`) and the job view's `timing` are answered by the test (Playwright's
`page.route`), so the waterfall's drawing is checked exactly: one row per span in tree order, indented by depth, each
bar where its times put it on the shared axis, failures in red and said in words, model calls and retries marked, a
span's attributes shown as text on a click, a fan-out's items folded beyond a few with "Show all", where the time went
as a stacked bar with seconds and shares, and no label clipped at two widths. Without the route (404, 405) or without
`timing` the page leaves those parts out quietly. `test_console_trace_live.py` drives the platform's own trace."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from local.platform import LocalPlatform
from tests.browser.conftest import Api, Tabs

T0 = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
LENGTH = 12.0  # seconds: the root span's, the axis's
FOLD_SHOWN = 5  # trace.js's FAN_OUT_SHOWN
FAILED_RED = "rgb(207, 34, 46)"  # --failed-line
HOSTILE = '<img src=x onerror="window.injected=1">'
LONG_MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0-with-a-rather-long-inference-profile-name"
TIMING = {
    "queue_wait_seconds": 1.2,
    "executing_seconds": 6.0,
    "backoff_seconds": 1.2,
    "review_wait_seconds": 2.4,
    "provider_wait_seconds": 0.6,
    "total_seconds": 12.0,
}
SHARES = {  # part → (its words, seconds, share) as the legend says them
    "queue": ("Queue wait", "1.20 s", "10%"),
    "executing": ("Executing", "6.00 s", "50%"),
    "backoff": ("Backoff and retries", "1.20 s", "10%"),
    "review": ("Waiting for review", "2.40 s", "20%"),
    "provider": ("Waiting on a provider", "600 ms", "5%"),
    "other": ("Not attributed", "600 ms", "5%"),
}


def _span(
    span_id: str,
    parent: str | None,
    name: str,
    start: float,
    end: float,
    status: str = "UNSET",
    **attributes: Any,
) -> dict[str, Any]:
    at = lambda s: (T0 + timedelta(seconds=s)).isoformat().replace("+00:00", "Z")  # noqa: E731
    return {
        "span_id": span_id,
        "parent_id": parent,
        "name": name,
        "start": at(start),
        "end": at(end),
        "status": status,
        "attributes": {k.replace("__", "."): v for k, v in attributes.items()},
    }


def _trace(job_id: str) -> dict[str, Any]:
    """A document-analysis job's trace: submission, queue wait, a fan-out of 12 items (one failed, then retried), a
    model call that failed and its retry, a review wait and a webhook delivery. Listed out of order on purpose."""
    genai = {
        "gen_ai__operation__name": "chat",
        "gen_ai__provider__name": "aws.bedrock",
        "gen_ai__request__model": LONG_MODEL,
    }
    spans = [
        _span("s-webhook", "s-root", "webhook delivery", 11.6, 12.0, "OK", longhaul__webhook__attempt=1),
        _span("s-root", None, "job document-analysis", 0.0, LENGTH, longhaul__job_id=job_id),
        _span("s-submit", "s-root", "POST /v1/jobs", 0.0, 0.2, "OK"),
        _span("s-validate", "s-submit", "validate", 0.0, 0.05),
        _span("s-idem", "s-submit", "idempotency", 0.05, 0.08),
        _span("s-tx", "s-submit", "transaction", 0.08, 0.19),
        _span("s-queue", "s-root", "queue wait", 0.2, 1.4, longhaul__sla_class="standard"),
        _span("s-parse", "s-root", "step parse_documents", 1.4, 4.0),
        *[
            _span(
                f"s-item-{i}",
                "s-parse",
                f"parse_documents item {i}",
                1.5 + 0.2 * i,
                1.8 + 0.2 * i,
                "ERROR" if i == 9 else "OK",
                longhaul__item=i,
            )
            for i in range(12)
        ],  # item 9 fails, and is retried below
        _span("s-draft", "s-root", "step draft_answer", 4.0, 9.0),
        _span(
            "s-chat-1",
            "s-draft",
            f"chat {LONG_MODEL}",
            4.1,
            5.0,
            "ERROR",
            **genai,
            longhaul__attempt=1,
            error__type="ModelTimeout",
        ),
        _span(
            "s-chat-2",
            "s-draft",
            f"chat {LONG_MODEL}",
            6.0,
            8.8,
            "OK",
            **genai,
            longhaul__attempt=2,
            gen_ai__usage__input_tokens=1200,
            gen_ai__usage__output_tokens=340,
            longhaul__note=HOSTILE,
        ),
        _span("s-review", "s-root", "review wait", 9.0, 11.5),
        _span("s-item-9b", "s-parse", "parse_documents item 9", 3.6, 3.9, "OK", longhaul__item=9, longhaul__attempt=2),
    ]
    return {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "spans": spans}


def _tree_order(trace: dict[str, Any]) -> list[tuple[str, int]]:
    spans = trace["spans"]
    children: dict[str | None, list[dict[str, Any]]] = {}
    for span in spans:
        children.setdefault(span["parent_id"], []).append(span)
    order: list[tuple[str, int]] = []

    def walk(parent: str | None, depth: int) -> None:
        for span in sorted(
            children.get(parent, []),
            key=lambda s: (datetime.fromisoformat(s["start"]), datetime.fromisoformat(s["end"])),
        ):
            order.append((span["span_id"], depth))
            walk(span["span_id"], depth + 1)

    walk(None, 0)
    return order


@pytest.fixture(scope="module")
def job_id(platform: LocalPlatform) -> Iterator[str]:
    """One job of tenant alpha, whatever its progress: the page reads it, its trace is the test's."""
    yield Api(platform, "alpha").submit()


def _open(
    tabs: Tabs,
    key: str,
    job_id: str,
    *,
    trace: dict[str, Any] | None,
    trace_status: int = 200,
    timing: dict[str, Any] | None,
) -> Any:
    asked: list[str] = []
    page = tabs.open(f"/console/jobs/{job_id}")

    def answer_trace(route: Any) -> None:
        asked.append(route.request.url)
        if trace_status == 200:
            route.fulfill(status=200, content_type="application/json", body=json.dumps(trace))
        else:
            problem = {"type": "about:blank", "title": "Not Found", "status": trace_status, "detail": "no such route"}
            route.fulfill(status=trace_status, content_type="application/problem+json", body=json.dumps(problem))

    def answer_job(route: Any) -> None:
        try:
            response = route.fetch()
        except PlaywrightError:  # the page was closed meanwhile
            return
        body = response.json()
        body.pop("timing", None)
        if timing is not None:
            body["timing"] = timing
        route.fulfill(response=response, json=body)

    page.route(f"**/v1/jobs/{job_id}/trace", answer_trace)
    page.route(f"**/v1/jobs/{job_id}", answer_job)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".job-head h1")).to_have_text(job_id)
    page.asked_trace = asked  # type: ignore[attr-defined]
    return page


# Where each row's bar lies in its track, as fractions of the track's width, and whether each bar is within it.
BARS = """() => [...document.querySelectorAll('#waterfall li[data-span-id]')].map((row) => {
  const track = row.querySelector('.span-track').getBoundingClientRect();
  const bar = row.querySelector('.span-bar').getBoundingClientRect();
  return { id: row.dataset.spanId, left: (bar.left - track.left) / track.width, width: bar.width / track.width,
    px: bar.width, inside: bar.left >= track.left - 0.5 && bar.right <= track.right + 0.5 };
})"""

# Every text of the trace panel that could be cut: within its cell (its row's grid cell, or the panel), and no box
# narrower than its content.
CLIPPED = """() => {
  const panel = document.getElementById('trace');
  const frame = panel.getBoundingClientRect();
  const problems = [];
  const inside = (a, b) => a.left >= b.left - 0.5 && a.right <= b.right + 0.5 && a.top >= b.top - 0.5
    && a.bottom <= b.bottom + 0.5;
  const texts = panel.querySelectorAll('.span-name, .tag, .span-sub, .span-dur, .tick, .span-fold button, '
    + '.timing-legend li > *, .timing-total, #trace-id, .legend li');
  for (const el of texts) {
    const box = el.getBoundingClientRect();
    if (!box.width) continue;
    const cell = el.closest('.span-label, .span-dur, .span-track, .span-head') || panel;
    if (!inside(box, cell.getBoundingClientRect())) problems.push(`"${el.textContent}" outside its cell`);
    if (!inside(box, frame)) problems.push(`"${el.textContent}" outside the panel`);
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).display !== 'inline') {
      problems.push(`"${el.textContent}" wider than its box`);
    }
  }
  const labels = [...panel.querySelectorAll('.waterfall li[data-span-id]')].map((row) => [
    row.querySelector('.span-label').getBoundingClientRect(), row.querySelector('.span-dur').getBoundingClientRect()]);
  for (const [label, dur] of labels) if (label.right > dur.left + 0.5) problems.push('a name runs into its duration');
  const ticks = [...panel.querySelectorAll('.tick')].map((t) => t.getBoundingClientRect());
  for (let i = 1; i < ticks.length; i += 1) if (ticks[i].left < ticks[i - 1].right) problems.push('ticks overlap');
  return problems;
}"""


def test_the_waterfall_draws_every_span_on_one_axis_with_where_the_time_went_on_top(
    tabs: Tabs, keys: dict[str, str], job_id: str
) -> None:
    trace = _trace(job_id)
    order = _tree_order(trace)
    by_id = {s["span_id"]: s for s in trace["spans"]}
    folded = [f"s-item-{i}" for i in range(FOLD_SHOWN, 12) if i != 9]  # beyond the first five, but the failed one
    page = _open(tabs, keys["alpha"], job_id, trace=trace, timing=TIMING)

    # Where the time went: the five parts (and what they leave unnamed), each with its seconds and share.
    panel = page.locator("#trace")
    expect(panel.get_by_role("heading", name="Where the time went")).to_be_visible()
    expect(page.locator(".timing-total")).to_have_text("Total 12.0 s")
    for part, (words, secs, share) in SHARES.items():
        expect(page.locator(f'.timing-legend li[data-part="{part}"]')).to_have_text(f"{words}{secs}{share}")
    bar_width = page.locator(".timing-bar").bounding_box()["width"] - 2  # its border
    for part, value in [("queue", 1.2), ("executing", 6.0), ("review", 2.4), ("provider", 0.6), ("other", 0.6)]:
        width = page.locator(f'.timing-part[data-part="{part}"]').bounding_box()["width"]
        assert abs(width - bar_width * value / LENGTH) < 1.5, (part, width, bar_width)

    # The waterfall: one row per span (a fan-out's items folded beyond five), in tree order, indented by depth.
    rows = page.locator("#waterfall li[data-span-id]")
    expect(rows).to_have_count(len(order) - len(folded))
    expect(page.locator("#trace-id")).to_contain_text(trace["trace_id"])
    drawn = rows.evaluate_all("rows => rows.map((r) => [r.dataset.spanId, Number(r.dataset.depth)])")
    assert drawn == [[span_id, depth] for span_id, depth in order if span_id not in folded]
    lefts = {
        r[0]: r[1]
        for r in rows.evaluate_all(
            "rows => rows.map((r) => [r.dataset.spanId, r.querySelector('.span-name').getBoundingClientRect().left])"
        )
    }
    for span_id, left in lefts.items():
        parent = by_id[span_id]["parent_id"]
        if parent:
            assert left > lefts[parent] + 8, (span_id, "is not indented under", parent)

    # Each bar where its span's times put it on the shared axis, and within it.
    for bar in page.evaluate(BARS):
        span = by_id[bar["id"]]
        start = (datetime.fromisoformat(span["start"]) - T0).total_seconds()
        length = (datetime.fromisoformat(span["end"]) - datetime.fromisoformat(span["start"])).total_seconds()
        assert bar["inside"], bar
        assert abs(bar["left"] - start / LENGTH) < 0.005, bar
        assert abs(bar["width"] - length / LENGTH) < 0.005 or bar["px"] == pytest.approx(2, abs=0.5), bar
    expect(page.locator('li[data-span-id="s-root"] .span-dur')).to_contain_text("12.0 s")
    expect(page.locator('li[data-span-id="s-queue"] .span-dur')).to_contain_text("1.20 s")

    # Failures in red and in words; the model calls marked; the retries said.
    failed = page.locator('#waterfall li[data-status="ERROR"]')
    expect(failed).to_have_count(2)
    for span_id in ("s-chat-1", "s-item-9"):
        bar_colour = page.locator(f'li[data-span-id="{span_id}"] .span-bar').evaluate(
            "b => getComputedStyle(b).backgroundColor"
        )
        assert bar_colour == FAILED_RED
        expect(page.locator(f'li[data-span-id="{span_id}"] .tag.error')).to_contain_text("✕ error")
    expect(page.locator('li[data-span-id="s-chat-1"] .tag.error')).to_have_text("✕ error: ModelTimeout")
    expect(page.locator('li[data-span-id="s-chat-1"] .tag.attempt')).to_have_text("attempt 1")
    expect(page.locator('li[data-span-id="s-chat-1"]')).to_have_class(re.compile(r"\berror\b.*\bgenai\b"))
    expect(page.locator('li[data-span-id="s-chat-2"]')).to_have_class(re.compile(r"\bgenai\b.*\bretry\b"))
    for span_id in ("s-chat-1", "s-chat-2"):
        expect(page.locator(f'li[data-span-id="{span_id}"] .tag.genai')).to_have_text("✦ model call")
    expect(page.locator('li[data-span-id="s-chat-2"] .tag.retry')).to_have_text("↻ retry · attempt 2")
    # the model once (the span's name has it), the tokens beside it
    expect(page.locator('li[data-span-id="s-chat-2"] .span-sub')).to_have_text("1,200 in, 340 out tokens")
    expect(page.locator('li[data-span-id="s-item-9b"] .tag.retry')).to_have_text("↻ retry · attempt 2")
    expect(page.locator('li[data-span-id="s-queue"] .tag')).to_have_count(0)
    assert page.evaluate("() => document.querySelector('#waterfall li[data-span-id=\"s-queue\"] .span-bar').style.left")
    assert (
        page.evaluate(
            "() => getComputedStyle(document.querySelector('li[data-span-id=\"s-queue\"] .span-bar')).backgroundColor"
        )
        != FAILED_RED
    )
    assert page.evaluate(CLIPPED) == []
    tabs.shoot(page, "trace-waterfall")

    # A span's attributes on a click, as text (a value that looks like HTML stays text); its name's title has them too.
    chat = page.locator('li[data-span-id="s-chat-2"]')
    assert "gen_ai.usage.input_tokens: 1200" in (chat.locator(".span-name").get_attribute("title") or "")
    chat.locator(".span-name").click()
    expect(chat.locator(".span-name")).to_have_attribute("aria-expanded", "true")
    expect(chat.locator('tr[data-attribute="gen_ai.usage.input_tokens"] td')).to_have_text("1200")
    expect(chat.locator('tr[data-attribute="gen_ai.operation.name"] td')).to_have_text("chat")
    expect(chat.locator('tr[data-attribute="longhaul.note"] td')).to_have_text(HOSTILE)
    assert page.locator("#trace img").count() == 0 and page.evaluate("() => window.injected") is None
    expect(chat.locator(".span-name")).to_be_focused()
    assert page.evaluate(CLIPPED) == []
    tabs.shoot(page, "trace-span-attributes")

    # The fan-out's items: the first five and the one that failed, the rest on request (and folded again).
    fold = page.locator("#waterfall .span-fold")
    expect(fold).to_have_text(f"{len(folded)} more like “parse_documents item 0” not shown (13 in all). Show all 13")
    # the fold row comes after the family's last drawn item
    assert (
        page.evaluate("() => document.querySelector('#waterfall .span-fold').previousElementSibling.dataset.spanId")
        == "s-item-9b"
    )
    fold.get_by_role("button", name="Show all 13").click()
    expect(rows).to_have_count(len(order))
    assert rows.evaluate_all("rows => rows.map((r) => r.dataset.spanId)") == [span_id for span_id, _ in order]
    expect(chat.locator(".span-name")).to_have_attribute("aria-expanded", "true")  # what the reader opened stays open
    expect(page.get_by_role("button", name="Show the first 5 only")).to_be_focused()
    page.get_by_role("button", name="Show the first 5 only").click()
    expect(rows).to_have_count(len(order) - len(folded))

    # Narrow: names wrap, nothing is cut, every bar still within its axis.
    page.set_viewport_size({"width": 760, "height": 1000})
    page.wait_for_timeout(100)
    assert page.evaluate(CLIPPED) == []
    assert all(bar["inside"] for bar in page.evaluate(BARS))
    tabs.shoot(page, "trace-waterfall-narrow")
    page.set_viewport_size({"width": 1440, "height": 1000})


@pytest.mark.parametrize("status", [404, 405])
def test_without_the_trace_route_or_timing_the_page_leaves_them_out_quietly(
    tabs: Tabs, keys: dict[str, str], job_id: str, status: int
) -> None:
    page = _open(tabs, keys["alpha"], job_id, trace=None, trace_status=status, timing=None)
    expect(page.locator('svg .node[data-state="parse_documents"]')).to_be_visible()  # the rest of the page is drawn
    for _ in range(50):
        if page.asked_trace:  # type: ignore[attr-defined]
            break
        page.wait_for_timeout(100)
    assert page.asked_trace  # type: ignore[attr-defined]
    expect(page.locator("#trace")).to_be_hidden()
    expect(page.locator("#trace-problem")).to_have_count(0)
    expect(page.get_by_role("alert")).to_have_count(0)

    # With `timing` but no trace route: where the time went, without a waterfall.
    page = _open(tabs, keys["alpha"], job_id, trace=None, trace_status=status, timing=TIMING)
    expect(page.locator("#timing")).to_be_visible()
    expect(page.locator('.timing-legend li[data-part="review"]')).to_contain_text("Waiting for review")
    expect(page.locator("#waterfall-heading")).to_be_hidden()
    expect(page.locator("#waterfall li")).to_have_count(0)
