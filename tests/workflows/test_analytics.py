"""Analytics over every job, on the local platform: a finished job is exported by the export function (under its own
synthesized role: the autouse `least_privilege` fixture fails on any call it was not granted), and the operators'
report of that job's window says what the job's own view says it cost."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from local.platform import LocalPlatform
from tests.workflows.conftest import Client


def test_a_finished_job_is_exported_and_the_report_totals_its_cost(
    platform: LocalPlatform, alpha: Client, sample_request: dict[str, Any]
) -> None:
    # Given a completed job, whose cost its view settles (its executions have ended)
    job_id = alpha.submit(sample_request)
    assert alpha.wait(job_id)["status"] == "completed"
    job = alpha.get(f"/v1/jobs/{job_id}").json()
    # When the export function runs for it (the schedule would run it within its interval)
    (exporter,) = [name for lid, name in platform.deployment.functions.items() if "AnalyticsExporter" in lid]
    answer = platform.client("lambda").invoke(FunctionName=exporter, Payload=json.dumps({"job_id": job_id}).encode())
    assert json.loads(answer["Payload"].read()) == {"exported": 1, "failed": 0}
    # Then the operators' report of the job's window holds that job, its total the job's cost
    created = datetime.fromisoformat(job["created_at"])
    window = {"since": created.isoformat(), "until": (created + timedelta(milliseconds=1)).isoformat()}
    ops = Client(platform, "ops")
    report = ops.get("/v1/ops/reports", tenant_id="alpha", by="step", **window).json()
    assert (report["jobs"], report["total_usd"]) == (1, job["cost"]["total"]), report
    assert sum(Decimal(row["usd"]) for row in report["spend"]) == Decimal(job["cost"]["model"]["usd"])
    assert {s["step"] for s in report["steps"]} >= {"parse_documents", "draft_answer"}
    # And the tenant's own report says the same
    own = alpha.get("/v1/reports/usage", **window).json()
    assert (own["tenant_id"], own["jobs"], own["total_usd"]) == ("alpha", 1, job["cost"]["total"])
