"""The `longhaul` command against the local platform (started on free ports by the session), run as a user runs it:
the installed console script in its own process, with LONGHAUL_URL and LONGHAUL_API_KEY set (faults are injected in
this process, which runs the platform). A submission watched to completion (exit 0), a job that fails (exit 1) and an
operator's replay planned without starting anything then run, a reviewer's approval, a cancellation that ends a
watcher with exit 1, an upload, a bad key and a bad request (the problem, exit 2, no traceback), `--output json` that
parses, the admin commands against the deployed stack, and a real webhook delivery verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from local import lambda_runtime
from local.deploy import wait_until
from local.keys import parse_webhook_secrets
from local.platform import DEFAULT_WEBHOOK_SECRETS, LocalPlatform
from longhaul.storage.cache import LOOKUP_CACHE_SECONDS
from tests.unit.receiver import receiver
from tests.workflows.conftest import SAMPLES, Client
from tests.workflows.test_review_and_webhooks import status_of

ROOT = Path(__file__).resolve().parents[2]
LONGHAUL = Path(sys.executable).with_name("longhaul")  # the console script `make run`/`make test` install


@dataclass
class Ran:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def environment(platform: LocalPlatform, key: str) -> dict[str, str]:
    """A user's environment: the platform's URL and a key; this checkout's code first on the path."""
    assert LONGHAUL.exists(), f"{LONGHAUL} is not installed: `make test` installs it (pip install -e client)"
    return {
        **os.environ,
        "LONGHAUL_URL": str(platform.api_url),
        "LONGHAUL_API_KEY": platform.key_for(key),
        "PYTHONPATH": os.pathsep.join(str(ROOT / path) for path in ("lambdas", "client/src")),
        "COLUMNS": "200",
    }


def longhaul(platform: LocalPlatform, *args: str | Path, key: str = "alpha") -> Ran:
    """One command, as a user with LONGHAUL_URL and LONGHAUL_API_KEY set (the key named `key`) runs it."""
    done = subprocess.run(
        [str(LONGHAUL), *map(str, args)],
        env=environment(platform, key),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return Ran(done.returncode, done.stdout, done.stderr)


def as_json(result: Any) -> Any:
    assert result.stdout.strip(), result.stderr
    return json.loads(result.stdout)


def request_file(tmp_path: Path, sample_request: dict[str, Any], **changes: Any) -> Path:
    path = tmp_path / "request.json"
    path.write_text(json.dumps({**sample_request, **changes}))
    return path


def test_a_job_watched_to_completion_its_json_outputs_and_its_verified_webhook(
    platform: LocalPlatform, tmp_path: Path, sample_request: dict[str, Any]
) -> None:
    secrets = parse_webhook_secrets(DEFAULT_WEBHOOK_SECRETS)
    with receiver() as hooks:
        platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST=hooks.origin)
        try:
            request = request_file(tmp_path, sample_request, callback_url=f"{hooks.origin}/hooks")
            watched = longhaul(platform, "submit", request, "--watch")
            # its draft's provisional result, then its completion: one webhook each
            arrived = hooks.wait_for(2, timeout=60)
            assert sorted(json.loads(r.body)["type"] for r in arrived) == ["job.completed", "job.provisional"]
            (delivered,) = [r for r in arrived if json.loads(r.body)["type"] == "job.completed"]
        finally:
            platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST="")

    # The job's id first, then one line per event (piped), then how it ended
    assert watched.exit_code == 0, watched.output
    lines = watched.stdout.splitlines()
    job_id = lines[0]
    assert job_id.startswith("job_")
    assert any("job_completed" in line for line in lines[1:-1])
    assert lines[-1].startswith("completed in")

    # Every --output json is one document
    status = as_json(longhaul(platform, "status", job_id, "--output", "json"))
    events = as_json(longhaul(platform, "events", job_id, "-o", "json"))["events"]
    jobs = as_json(longhaul(platform, "jobs", "--status", "completed", "-o", "json"))["jobs"]
    result = as_json(longhaul(platform, "result", job_id, "-o", "json"))
    markdown = longhaul(platform, "result", job_id, "--markdown")
    assert status["status"] == "completed" and status["callback"]["webhook_id"] == delivered.headers["webhook-id"]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1)) and events[-1]["type"] == "job_completed"
    assert job_id in [j["job_id"] for j in jobs]
    assert result["citations"] and result["budget"]["max_tokens"] > 0
    assert result["answer"].split()[0] in markdown.stdout

    # The delivery, saved as an HTTP message, verifies with the tenant's secret and not with another's
    message = tmp_path / "delivery.http"
    head = "".join(f"{name}: {value}\r\n" for name, value in delivered.headers.items())
    message.write_bytes(f"POST {delivered.path} HTTP/1.1\r\n{head}\r\n".encode() + delivered.body)
    verified = longhaul(platform, "verify-webhook", message, "--secret", secrets["alpha"])
    forged = longhaul(platform, "verify-webhook", message, "--secret", secrets["beta"])
    assert verified.exit_code == 0 and verified.stdout.strip() == delivered.headers["webhook-id"]
    assert forged.exit_code == 1 and "rejected" in forged.stderr


def test_a_failing_job_exits_1_and_an_operator_plans_its_replay_then_runs_it(
    platform: LocalPlatform, tmp_path: Path, sample_request: dict[str, Any], inject: Any
) -> None:
    # Given a job that fails at draft_answer (a deterministic error: no retry)
    inject("draft_answer=invalid-input")
    failed = longhaul(platform, "submit", request_file(tmp_path, sample_request), "--watch", "-o", "json")
    assert failed.exit_code == 1, failed.output
    job = as_json(failed)["job"]
    job_id = job["job_id"]
    assert job["status"] == "failed" and job["error"]["step"] == "draft_answer"
    before = as_json(longhaul(platform, "events", job_id, "-o", "json"))["events"]
    inject("")

    # When an operator asks for the replay's plan
    planned = longhaul(platform, "ops", "replay", job_id, "--dry-run", "-o", "json", key="ops")
    shown = longhaul(platform, "ops", "replay", job_id, "--dry-run", key="ops")

    # Then it names what would run again, and nothing changed or started
    plan = as_json(planned)
    assert planned.exit_code == 0 and plan["dry_run"] is True and plan["status"] == "failed"
    assert plan["from_step"] == "draft_answer" and plan["rerun_steps"][0] == "draft_answer"
    assert "extract_evidence" not in plan["rerun_steps"], "the steps before it keep their checkpoints"
    assert "nothing was changed or started" in shown.stdout and "draft_answer" in shown.stdout
    assert as_json(longhaul(platform, "events", job_id, "-o", "json"))["events"] == before

    # And the replay itself runs from there to completion
    replayed = longhaul(platform, "ops", "replay", job_id, "-o", "json", key="ops")
    assert replayed.exit_code == 0 and as_json(replayed)["status"] == "queued"
    assert longhaul(platform, "watch", job_id).exit_code == 0


def test_a_reviewer_approves_with_the_command_and_the_job_completes(
    platform: LocalPlatform, tmp_path: Path, sample_request: dict[str, Any]
) -> None:
    review = {"mode": "always", "deadline_seconds": 3600}
    job_id = longhaul(platform, "submit", request_file(tmp_path, sample_request, review=review)).stdout.strip()
    review_id = status_of(Client(platform, "alpha"), job_id, "waiting_for_review")["review"]["review_id"]
    pending = as_json(longhaul(platform, "reviews", "-o", "json", key="alpha-reviewer"))["reviews"]
    shown = longhaul(platform, "review", "show", review_id, key="alpha-reviewer")
    approved = longhaul(platform, "review", "approve", review_id, "--comment", "checked", key="alpha-reviewer")
    finished = longhaul(platform, "watch", job_id)
    again = longhaul(platform, "review", "approve", review_id, key="alpha-reviewer")

    assert review_id in [r["review_id"] for r in pending]
    assert shown.exit_code == 0 and "evidence" in shown.stdout and job_id in shown.stdout
    assert approved.exit_code == 0 and "approved" in approved.stdout
    assert finished.exit_code == 0 and finished.stdout.splitlines()[-1].startswith("completed")
    assert again.exit_code == 2 and "already decided" in again.stderr


def test_cancel_stops_a_running_job_and_its_watcher_exits_1(
    platform: LocalPlatform, tmp_path: Path, sample_request: dict[str, Any], inject: Any
) -> None:
    inject("draft_answer=hang")
    job_id = longhaul(platform, "submit", request_file(tmp_path, sample_request)).stdout.strip()
    wait_until(lambda: lambda_runtime.hanging() or None, timeout=60, what="the job to run its hanging step")
    watcher = subprocess.Popen(
        [str(LONGHAUL), "watch", job_id],
        env=environment(platform, "alpha"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        cancelled = longhaul(platform, "cancel", job_id)
        lambda_runtime.interrupt_waits()  # the hung invocation ends now rather than at its timeout
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    wait_until(lambda: not lambda_runtime.hanging() or None, timeout=30, what="the hang to end")

    assert cancelled.exit_code == 0 and f"{job_id} cancelled" in cancelled.stdout
    assert "kept: list_documents" in cancelled.stdout
    assert watcher.returncode == 1, out + err
    assert out.splitlines()[-1].startswith("cancelled") and "Traceback" not in err


def test_a_bad_key_or_a_bad_request_prints_the_problem_and_exits_2(platform: LocalPlatform, tmp_path: Path) -> None:
    bad_request = tmp_path / "bad.json"
    bad_request.write_text(json.dumps({"workflow": "document-analysis", "input": {"question": "?", "documents": []}}))

    bad_key = longhaul(platform, "jobs", "--key", "lh_not_a_key")
    invalid = longhaul(platform, "submit", bad_request)
    invalid_json = longhaul(platform, "submit", bad_request, "--output", "json")

    assert bad_key.exit_code == 2 and "API key" in bad_key.stderr and bad_key.stdout == ""
    assert invalid.exit_code == 2 and invalid.stdout == ""
    assert "body.input.question" in invalid.stderr and "body.input.documents" in invalid.stderr
    problem = as_json(invalid_json)
    assert problem["status"] == 422 and problem["type"].endswith("/invalid-request")


def test_an_uploaded_document_is_analysed(platform: LocalPlatform, tmp_path: Path) -> None:
    uploaded = longhaul(platform, "upload", SAMPLES / "documents" / "master_services_agreement.pdf")
    upload_id = uploaded.stdout.strip()
    assert uploaded.exit_code == 0 and upload_id.startswith("up_"), uploaded.output
    question = "What is the liability cap?"
    document = {"name": "msa.pdf", "upload_id": upload_id}
    request = {"workflow": "document-analysis", "input": {"question": question, "documents": [document]}}
    path = tmp_path / "msa.json"
    path.write_text(json.dumps(request))

    watched = longhaul(platform, "submit", path, "--watch", "-o", "json")

    assert watched.exit_code == 0, watched.output
    job_id = as_json(watched)["job"]["job_id"]
    result = as_json(longhaul(platform, "result", job_id, "-o", "json"))
    assert [d["name"] for d in result["documents"]] == ["msa.pdf"] and result["documents"][0]["pages"] > 0


def test_the_admin_commands_work_against_the_deployed_stack(platform: LocalPlatform) -> None:
    stack = platform.deployment.stack_name
    tenant = f"admin{uuid.uuid4().hex[:8]}"  # a tenant of its own: other tests' jobs are in the shared platform

    created = longhaul(platform, "admin", "create-key", "--stack", stack, "--tenant", tenant)
    key = created.stdout.strip()
    listed = longhaul(platform, "jobs", "--key", key, "-o", "json")
    secret = longhaul(platform, "admin", "rotate-webhook-secret", "--stack", stack, "--tenant", tenant)
    revoked = longhaul(platform, "admin", "revoke-key", "--stack", stack, "--key", key)

    # the API function keeps a key it authenticated for LOOKUP_CACHE_SECONDS: the revocation holds within that time
    def refused_now() -> Any:
        answer = longhaul(platform, "jobs", "--key", key)
        return answer if answer.exit_code != 0 else None

    refused = wait_until(refused_now, timeout=LOOKUP_CACHE_SECONDS + 20, interval=1, what="the revoked key refused")

    assert created.exit_code == 0 and key.startswith("lh_"), created.output
    assert listed.exit_code == 0 and as_json(listed) == {"jobs": []}
    assert secret.exit_code == 0 and secret.stdout.startswith("whsec_")
    secrets = platform.client("secretsmanager")
    stored = json.loads(secrets.get_secret_value(SecretId=f"{platform.webhook_secrets_prefix}{tenant}")["SecretString"])
    assert stored["current"] == secret.stdout.strip()
    assert revoked.exit_code == 0 and tenant in revoked.stdout
    assert refused.exit_code == 2 and "API key" in refused.stderr


@pytest.fixture(autouse=True)
def _no_leftover_hang() -> Any:
    yield
    lambda_runtime.interrupt_waits()


def test_a_signal_sent_with_the_command_is_taken_once(platform: LocalPlatform, tmp_path: Path) -> None:
    invoices = SAMPLES / "invoices"
    contract = (invoices / "contract_price_list.txt").read_text()
    request = {
        "workflow": "invoice-reconciliation",
        "input": {
            "contract": {"name": "contract.txt", "text": contract},
            "invoices": [{"name": "inv_01_northwind.txt", "text": (invoices / "inv_01_northwind.txt").read_text()}],
            "await_price_list": {"timeout_seconds": 600},
        },
    }
    path = tmp_path / "invoice.json"
    path.write_text(json.dumps(request))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"name": "prices_rev2.txt", "text": contract}))
    job_id = longhaul(platform, "submit", path).stdout.strip()

    sent = longhaul(platform, "signal", job_id, "price_list", "--data", f"@{prices}", "-o", "json")
    again = longhaul(platform, "signal", job_id, "price_list", "--data", f"@{prices}")
    unknown = longhaul(platform, "signal", job_id, "nope", "--data", "{}")
    not_an_object = longhaul(platform, "signal", job_id, "price_list", "--data", "[1]")

    assert sent.exit_code == 0 and as_json(sent)["signal"] == "price_list", sent.output
    assert again.exit_code == 2 and "cannot be taken" in again.stderr and again.stdout == "", again.output
    assert unknown.exit_code == 2 and "has no signal 'nope'" in unknown.stderr, unknown.output
    assert not_an_object.exit_code == 2 and "JSON object" in not_an_object.stderr, not_an_object.output
    watched = longhaul(platform, "watch", job_id)
    assert watched.exit_code == 0, watched.output
    result = as_json(longhaul(platform, "result", job_id, "-o", "json"))
    assert result["contract"]["document"] == "prices_rev2.txt"
