"""The `longhaul` command without a platform: the reference webhook verifier reads a delivery saved as an HTTP message;
a command without its API's address or key says which to set; the live view shows a fan-out's progress, the review a
job waits for and its webhook. (Against the local platform: tests/workflows/test_cli.py.)"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from longhaul.core.contracts import CallbackStatus, JobStatus, JobView, Progress, ReplayOutcome, ReviewSummary, Usage
from longhaul.webhooks.signing import new_secret, sign
from longhaul_client.cli import app
from longhaul_client.cli.render import job_panel, jobs_table, replay_plan

runner = CliRunner()
SECRET = new_secret()
BODY = b'{"type":"job.completed","data":{"job_id":"job_1","status":"completed"}}'


def delivery(secrets: list[str], *, body: bytes = BODY, at: float | None = None, request_line: bool = True) -> bytes:
    headers = sign(secrets, "msg_17", int(at if at is not None else time.time()), body)
    lines = ["POST /hooks/longhaul HTTP/1.1"] if request_line else []
    lines += ["Host: receiver.example", "Content-Type: application/json", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def verify(raw: bytes, *args: str) -> object:
    return runner.invoke(app, ["verify-webhook", *args], input=raw, catch_exceptions=False)


@pytest.mark.parametrize("request_line", [True, False], ids=["request", "headers-only"])
def test_a_delivery_saved_as_an_http_message_verifies_and_prints_its_webhook_id(request_line: bool) -> None:
    done = verify(delivery([SECRET], request_line=request_line) + b"\n", "--secret", SECRET)  # an editor's newline

    assert done.exit_code == 0, done.stderr
    assert done.stdout.strip() == "msg_17"


def test_during_a_rotation_either_secret_verifies() -> None:
    fresh = new_secret()

    done = verify(delivery([fresh]), "--secret", SECRET, "--secret", fresh, "--output", "json")

    assert done.exit_code == 0 and json.loads(done.stdout) == {"verified": True, "webhook_id": "msg_17"}


def _spoiled(kind: str) -> bytes:
    """A delivery that must not verify, made now (its timestamp is checked against the clock)."""
    if kind == "tampered":
        return delivery([SECRET]).replace(b'"completed"}}', b'"failed"}}')
    if kind == "another-secret":
        return delivery([new_secret()])
    if kind == "stale":
        return delivery([SECRET], at=time.time() - 3600)
    return b"Content-Type: application/json\r\n\r\n" + BODY  # unsigned


@pytest.mark.parametrize(
    ("kind", "why"),
    [("tampered", "signature"), ("another-secret", "signature"), ("stale", "timestamp"), ("unsigned", "missing")],
)
def test_a_delivery_that_does_not_verify_is_exit_1_saying_why(kind: str, why: str) -> None:
    done = verify(_spoiled(kind), "--secret", SECRET)

    assert done.exit_code == 1
    assert "rejected" in done.stderr and why in done.stderr and done.stdout == ""


def test_without_the_apis_address_or_key_a_command_says_which_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LONGHAUL_URL", "LONGHAUL_API_KEY"):
        monkeypatch.delenv(name, raising=False)

    no_url = runner.invoke(app, ["jobs"], catch_exceptions=False)
    no_key = runner.invoke(app, ["jobs", "--url", "http://127.0.0.1:9"], catch_exceptions=False)
    as_json = runner.invoke(app, ["status", "job_x", "--url", "http://127.0.0.1:9", "-o", "json"])

    assert no_url.exit_code == 2 and "LONGHAUL_URL" in no_url.stderr
    assert no_key.exit_code == 2 and "LONGHAUL_API_KEY" in no_key.stderr
    assert as_json.exit_code == 2 and "detail" in json.loads(as_json.stdout), "--output json: still one document"


def test_the_live_view_shows_a_fan_outs_items_the_review_and_the_webhook() -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    job = JobView(
        job_id="job_" + "1" * 28,
        tenant_id="alpha",
        workflow="document-analysis",
        status=JobStatus.WAITING_FOR_REVIEW,
        current_step="parse_documents",
        progress=Progress(completed=312, total=1000, unit="documents", eta_seconds=95),
        model="offline:test",
        usage=Usage(input_tokens=1821, output_tokens=1245, cost_usd="0.008046"),
        created_at=now - timedelta(seconds=75),
        updated_at=now,
        started_at=now - timedelta(seconds=72),
        review=ReviewSummary(
            review_id="rev_1", since=now, deadline=now + timedelta(hours=1), assignee_group="analysts"
        ),
        callback=CallbackStatus(status="retrying", event="review.requested", webhook_id="msg_1", attempts=2),
    )
    console = Console(record=True, width=120, force_terminal=True)

    console.print(job_panel(job, now=now))

    shown = console.export_text()
    assert "parse_documents 312/1,000 documents · ETA 1:35" in shown
    assert "waiting_for_review" in shown and "1:12" in shown, "status and elapsed time"
    assert "1,821 in · 1,245 out · $0.008046" in shown
    assert "analysts" in shown and "rev_1" in shown
    assert "retrying · review.requested · 2 attempt(s)" in shown
    assert "━" in shown, "a progress bar"


@pytest.mark.parametrize("status", [JobStatus.CANCELLED, JobStatus.FAILED, JobStatus.EXPIRED])
def test_a_stopped_job_shows_what_it_did_and_that_it_stopped_in_status_and_in_the_list(status: JobStatus) -> None:
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    said = f"{status.value}: 1,931 of 5,000 documents done (at parse_documents)"
    job = JobView(
        job_id="job_" + "2" * 28,
        tenant_id="alpha",
        workflow="document-analysis",
        status=status,
        current_step=None,  # (a cancel clears it)
        progress=Progress(completed=1931, total=5000, unit="documents", message=said),
        model="offline:test",
        usage=Usage(input_tokens=0, output_tokens=0, cost_usd="0"),
        created_at=now - timedelta(seconds=75),
        updated_at=now,
        started_at=now - timedelta(seconds=72),
        finished_at=now,
    )
    console = Console(record=True, width=160, force_terminal=True)

    console.print(job_panel(job, now=now))
    console.print(jobs_table([job]))

    shown = console.export_text()
    assert shown.count(said) == 2 and "step 1931/5000" not in shown


def test_a_replay_plan_says_which_reviews_are_asked_again_and_whether_it_waits() -> None:
    plan = ReplayOutcome(
        job_id="job_" + "3" * 28,
        status=JobStatus.QUEUED,
        attempt=2,
        execution="job_" + "3" * 28 + "-r2",
        from_step="review",
        rerun_steps=["review", "publish_result"],
        rerun_items={},
        kept_items={},
        undecided_reviews=["review"],
        estimated_start_seconds=40,
    )
    console = Console(record=True, width=160, force_terminal=True)

    console.print(replay_plan(plan))

    shown = console.export_text()
    assert "reviews never decided, asked again before anything after them: review" in shown
    assert "estimated to start in 40 s" in shown


def test_update_says_what_to_change_and_reads_instructions_from_a_file(tmp_path: Path) -> None:
    from longhaul_client.cli.steer import _change, _instructions

    notes = tmp_path / "notes.txt"
    notes.write_text("Quote clause numbers.")

    change = _change(
        deadline_seconds=600,
        budget_usd="12.50",
        budget_tokens=None,
        sla_class=None,
        review_mode="always",
        instructions=_instructions(f"@{notes}"),
        max_turns=3,
        max_tool_calls=None,
    )
    nothing = runner.invoke(app, ["update", "job_" + "0" * 28, "--url", "http://api.test", "--key", "k"])

    assert change == {
        "deadline_seconds": 600,
        "budget": {"max_cost_usd": "12.50"},
        "review": {"mode": "always"},
        "instructions": "Quote clause numbers.",
        "agent": {"max_turns": 3},
    }
    assert nothing.exit_code == 2 and "name something to change" in nothing.stderr
