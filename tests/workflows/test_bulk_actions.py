"""An operator's bulk replay by error kind through the local front door (the `jobs:replay` path), sent twice with
its Idempotency-Key: exactly the matching jobs are replayed, once, and complete; then a hopeless job is terminated
with a message its owner reads."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from local.platform import LocalPlatform
from longhaul.core import faults
from tests.workflows.conftest import Client


def test_a_bulk_replay_by_error_kind_replays_exactly_the_matching_jobs_once_even_sent_twice(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any], inject: Callable[[str], None]
) -> None:
    since = datetime.now(UTC).isoformat()
    # Given two jobs that failed on invalid input at the draft, and one that failed otherwise
    inject("draft_answer=invalid-inputx1")
    wrong = [alpha.submit(sample_request) for _ in range(2)]
    assert [alpha.wait(j)["status"] for j in wrong] == ["failed", "failed"]
    inject("draft_answer=output-invalidx1")
    other = alpha.submit(sample_request)
    assert alpha.wait(other)["error"]["kind"] == "output-invalid"
    faults.install(faults.FaultInjector())  # the cause is fixed

    # When an operator looks (dry run), then replays by error kind, sending the same request twice
    ops = Client(platform, "ops")
    job_filter = {"error_kind": "invalid-input", "tenant_id": "alpha", "since": since}
    dry = ops.post("/v1/ops/jobs:replay", {"filter": job_filter})
    body = {"filter": job_filter, "dry_run": False, "reason": "the drafting prompt is fixed"}
    first = ops.post("/v1/ops/jobs:replay", body, **{"Idempotency-Key": "replay-invalid-input-1"})
    second = ops.post("/v1/ops/jobs:replay", body, **{"Idempotency-Key": "replay-invalid-input-1"})

    # Then the plan and the answers name exactly those jobs, each replayed once, and they complete
    assert dry.status_code == 200, dry.text
    assert {j["job_id"]: j["outcome"] for j in dry.json()["jobs"]} == dict.fromkeys(wrong, "would_replay")
    assert first.status_code == 200, first.text
    assert {j["job_id"]: j["outcome"] for j in first.json()["jobs"]} == dict.fromkeys(wrong, "replayed")
    assert second.json() == first.json()
    for job_id in wrong:
        assert alpha.wait(job_id)["status"] == "completed"
        replays = [e for e in alpha.events(job_id) if e["type"] == "job_replayed"]
        assert len(replays) == 1 and replays[0]["detail"]["from_step"] == "draft_answer"
    assert alpha.get(f"/v1/jobs/{other}").json()["attempts"] == 1

    # and the job that cannot be helped is ended with a message its owner reads
    message = "This request cannot be answered from the documents given; please send the signed contract."
    ended = ops.post(
        f"/v1/ops/jobs/{other}/terminate", {"status": "failed", "reason": "unanswerable", "message": message}
    )
    assert ended.status_code == 200, ended.text
    view = alpha.get(f"/v1/jobs/{other}").json()
    assert view["status"] == "failed" and view["error"]["message"] == message
    assert [e["detail"]["by"] for e in alpha.events(other) if e["type"] == "job_terminated"] == ["ops"]
