"""Erasure on the local platform: a job's, a tenant's, and one cut short by a crash; then every table, bucket (every
object version), queue and log group of the local AWS is searched for the job's marker and its id: nothing is found
but the tombstone (and the audit trail's entries, which name the job and hold no content)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import requests

from local.keys import ApiKey, seed_api_keys
from local.platform import LocalPlatform
from local.scan import left_after_erasure
from tests.workflows.conftest import Client


def marked_request(marker: str, upload_id: str | None = None) -> dict[str, Any]:
    documents: list[dict[str, Any]] = [
        {
            "name": "notes.md",
            "media_type": "text/markdown",
            "text": f"# Notes\n\nThe escrow agent is {marker} Holdings Ltd, appointed for the source code.\n\n"
            "The liability cap is twelve months of fees.\n",
        }
    ]
    if upload_id:
        documents.append({"name": "letter.txt", "media_type": "text/plain", "upload_id": upload_id})
    return {
        "workflow": "document-analysis",
        "input": {"question": f"Who is the escrow agent ({marker})?", "documents": documents},
    }


def upload(client: Client, text: str) -> str:
    ticket = client.post("/v1/uploads", {"filename": "letter.txt", "media_type": "text/plain"}).json()
    put = requests.put(ticket["upload_url"], data=text.encode(), headers=ticket["headers"], timeout=30)
    assert put.status_code == 200, put.text
    return str(ticket["upload_id"])


def findings(platform: LocalPlatform, needles: tuple[str, ...]) -> list[str]:
    """Where a marker (content) is found anywhere, or a job id anywhere but where an id may stay (`local.scan`)."""
    markers = tuple(n for n in needles if n.startswith("MARK"))
    job_ids = tuple(n for n in needles if not n.startswith("MARK"))
    return left_after_erasure(platform.client, markers=markers, job_ids=job_ids)


def ops_delete(platform: LocalPlatform, path: str) -> requests.Response:
    return requests.delete(f"{platform.api_url}{path}", headers=platform.auth_header("ops"), timeout=120)


def delete(client: Client, path: str) -> requests.Response:
    return requests.delete(f"{client.base}{path}", headers=client.headers, timeout=120)


def assert_erased(client: Client, job_id: str) -> None:
    gone = client.get(f"/v1/jobs/{job_id}")
    assert gone.status_code == 410, gone.text
    problem = gone.json()
    assert problem["type"].endswith("/job-erased") and problem["erased_at"]
    assert gone.headers["Content-Type"].startswith("application/problem+json")


def run_marked_job(client: Client, marker: str) -> str:
    upload_id = upload(client, f"Dear team, {marker} is our escrow agent.\n")
    job_id = client.submit(marked_request(marker, upload_id))
    job = client.wait(job_id, timeout=240)
    assert job["status"] == "completed", job.get("error")
    assert job["expires_at"], "the job view shows when its retention ends"
    return job_id


def test_an_erased_job_leaves_nothing_findable_but_its_tombstone(platform: LocalPlatform, alpha: Client):
    # Given a completed job whose question, document and upload hold a marker
    marker = f"MARK{uuid.uuid4().hex[:12]}"
    job_id = run_marked_job(alpha, marker)
    assert findings(platform, (marker,)), "the marker is found before the erasure (the scan can see it)"

    # When the tenant erases it
    answer = delete(alpha, f"/v1/jobs/{job_id}")

    # Then it is accepted and done, and the job answers 410 job-erased
    assert answer.status_code == 202, answer.text
    body = answer.json()
    assert body["status"] == "erased" and body["job_id"] == job_id
    assert {r["store"]: r["deleted"] for r in body["report"]}["artifacts"] > 0
    assert_erased(alpha, job_id)
    # And neither the marker nor the job's id is found anywhere but the tombstone
    assert findings(platform, (marker, job_id)) == []
    # And erasing it again answers the same, deleting nothing more
    again = delete(alpha, f"/v1/jobs/{job_id}")
    assert again.status_code == 202 and again.json()["erased_at"] == body["erased_at"]
    # And another tenant cannot tell it existed
    assert delete(Client(platform, "beta"), f"/v1/jobs/{job_id}").status_code == 404


def test_an_erasure_cut_short_by_a_crash_finishes_when_asked_again(
    platform: LocalPlatform, alpha: Client, inject: Callable[[str], None]
):
    # Given a completed job holding a marker, and an erasure that dies after deleting its artifacts
    marker = f"MARK{uuid.uuid4().hex[:12]}"
    job_id = run_marked_job(alpha, marker)
    inject("erase_artifacts=crash-after-side-effectx1")

    # When the tenant erases it, the function dies midway
    crashed = delete(alpha, f"/v1/jobs/{job_id}")
    assert crashed.status_code >= 500, crashed.text
    # Then the job already answers 410, and the stores after the crash still hold its data
    assert_erased(alpha, job_id)
    assert findings(platform, (job_id,)), "the records were not erased yet"

    # When it is asked again, the erasure goes on from where it stopped
    answer = delete(alpha, f"/v1/jobs/{job_id}")
    assert answer.status_code == 202 and answer.json()["status"] == "erased"
    assert findings(platform, (marker, job_id)) == []


def test_an_erased_tenant_leaves_nothing_findable_but_its_tombstones(platform: LocalPlatform):
    # Given a tenant of its own with two jobs holding markers
    tenant = f"erase-{uuid.uuid4().hex[:8]}"
    key = f"lh_local_{uuid.uuid4().hex}"
    seed_api_keys(
        platform.client("dynamodb", resource=True).Table(platform.deployment.table_name), [ApiKey(tenant, key)]
    )
    client = Client(platform, "alpha")
    client.headers = {"Authorization": f"Bearer {key}"}
    markers = [f"MARK{uuid.uuid4().hex[:12]}" for _ in range(2)]
    jobs = [run_marked_job(client, m) for m in markers]

    # When an operator erases the tenant's data
    answer = ops_delete(platform, f"/v1/ops/tenants/{tenant}/data")

    # Then the answer is a report per store, and every job answers 410
    assert answer.status_code == 200, answer.text
    report = {r["store"]: r["deleted"] for r in answer.json()}
    assert report["artifacts"] > 0 and report["uploads"] >= 2 and report["records"] > 0
    for job_id in jobs:
        assert_erased(client, job_id)
    assert findings(platform, (*markers, *jobs)) == []
    # And the tenant's usage report still works (its tombstones keep usage and cost)
    usage = client.get("/v1/reports/usage", since="1d")
    assert usage.status_code == 200, usage.text
    # And a tenant erasure asked again deletes nothing more
    again = ops_delete(platform, f"/v1/ops/tenants/{tenant}/data")
    assert again.status_code == 200 and all(r["deleted"] == 0 for r in again.json())


def test_a_job_past_its_tenants_retention_answers_410_and_the_sweep_erases_it(platform: LocalPlatform, alpha: Client):
    # Given a completed job holding a marker, whose retention has ended (its calendar entry moved to the past)
    marker = f"MARK{uuid.uuid4().hex[:12]}"
    job_id = run_marked_job(alpha, marker)
    table = platform.client("dynamodb", resource=True).Table(platform.deployment.table_name)
    job = table.get_item(Key={"pk": f"JOB#{job_id}", "sk": "JOB"})["Item"]
    table.delete_item(Key={"pk": "RETENTION", "sk": f"{job['retain_until']}#{job_id}"})
    past = "2020-01-01T00:00:00+00:00"
    table.update_item(
        Key={"pk": f"JOB#{job_id}", "sk": "JOB"},
        UpdateExpression="SET retain_until = :past",
        ExpressionAttributeValues={":past": past},
    )
    table.put_item(Item={"pk": "RETENTION", "sk": f"{past}#{job_id}", "job_id": job_id, "tenant_id": "alpha"})

    # Then it answers 410 job-erased at once, with the time its retention ended
    gone = alpha.get(f"/v1/jobs/{job_id}")
    assert gone.status_code == 410 and gone.json()["erased_at"].startswith("2020-01-01"), gone.text

    # When the sweep runs (as its schedule fires it)
    sweeper = platform.deployment.function_for_handler("handlers.ops.sweep")
    answer = platform.client("lambda").invoke(FunctionName=sweeper, Payload=b"{}")
    swept = json.loads(answer["Payload"].read())
    assert swept.get("retention_erased", 0) >= 1, swept

    # Then the job is erased: nothing but its tombstone is left
    assert_erased(alpha, job_id)
    assert findings(platform, (marker, job_id)) == []
