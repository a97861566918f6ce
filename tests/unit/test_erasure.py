"""Retention and erasure on moto: the policy's `retention_days`, a job's erasure store by store (every object version,
the job's partition, its stream, memory by provenance), one cut short by a crash at a store boundary and finished
when asked again, and the sweep's erasure of a job whose retention has ended."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from longhaul import services as wiring
from longhaul.core import faults, limits, schema
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy, TenantPolicyPatch
from longhaul.core.clock import iso
from longhaul.core.contracts import FactSource, JobStatus
from longhaul.core.erasure import ERASURE_STORES
from longhaul.core.records import MemoryRecord
from longhaul.core.streams import NewRecord
from longhaul.operations.erasure import StillRunning, erase_job, erase_tenant, sweep_retention
from longhaul.storage.submissions import NewJob
from longhaul.workflows import REGISTRY

UPLOAD = "up_" + "ab" * 16
MARKER = "MARKunit7f3e"
TENANT = "tenant-a"
OWNER = Principal(tenant_id=TENANT, role="tenant", key_id="k1")


def test_a_policy_keeps_jobs_30_days_unless_it_says_otherwise_within_the_bounds():
    assert TenantPolicy().retention_days == limits.RETENTION_DAYS_DEFAULT == 30
    assert TenantPolicyPatch(retention_days=7).applied_to(TenantPolicy()).retention_days == 7
    for wrong in (0, limits.RETENTION_DAYS_MAX + 1):
        with pytest.raises(ValidationError):
            TenantPolicy(retention_days=wrong)


def test_a_store_boundary_takes_a_crash_fault_only():
    (fault,) = faults.FaultInjector("erase_artifacts=crash-after-side-effectx1", REGISTRY).faults
    assert fault.step == "erase_artifacts"
    for wrong in ("erase_artifacts=transient", "erase_nowhere=crash-after-side-effect"):
        with pytest.raises(ValueError, match="bad fault"):
            faults.FaultInjector(wrong, REGISTRY)


def _job(services: wiring.Services, s3: Any, bucket: str, job_id: str, *, days: int = 30) -> None:
    now = services.now()
    services.jobs.create_job(
        NewJob(
            job_id,
            TENANT,
            "document-analysis",
            f"work/{job_id}/input.json",
            "h",
            "offline:test",
            30,
            idempotency_key=f"key-{job_id}",
            retain_until=iso(now + timedelta(days=days)),
        )
    )
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    document = {"question": f"who? {MARKER}", "documents": [{"name": "a", "upload_id": UPLOAD}]}
    s3.put_object(Bucket=bucket, Key=f"work/{job_id}/input.json", Body=json.dumps(document).encode())
    s3.put_object(Bucket=bucket, Key=f"uploads/{TENANT}/{UPLOAD}", Body=MARKER.encode())
    for version in range(2):  # an overwritten result: two versions, then a delete marker
        s3.put_object(Bucket=bucket, Key=f"results/{job_id}/result.json", Body=f"{MARKER} v{version}".encode())
    s3.delete_object(Bucket=bucket, Key=f"results/{job_id}/result.json")
    services.jobs.append_event(job_id, "step_started", step="parse_documents")
    services.streams.append(
        job_id, NewRecord(kind="output_delta", step="draft_answer", call_id="c1", text=f"said {MARKER}")
    )
    services.memory.put(
        MemoryRecord(
            memory_id=f"m-{job_id}",
            tenant_id=TENANT,
            kind="fact",
            subject="Acme",
            subject_key="acme",
            text=f"Acme's escrow agent is {MARKER}",
            job_id="job_other",
            recorded_at=now,
            provenance=FactSource(job_id=job_id, document="a", page=1, quote=MARKER),
        )
    )
    # A delivered webhook's body and a decided review's draft, on their index partitions
    services.jobs.table.put_item(
        Item={
            **schema.outbox_key(f"wh-{job_id}"),
            "job_id": job_id,
            "body": json.dumps({"answer": MARKER}),
            schema.GSI2_PK: schema.outbox_partition("delivered"),
            schema.GSI2_SK: iso(now),
        }
    )
    services.jobs.table.put_item(
        Item={
            **schema.review_key(f"rv-{job_id}"),
            "job_id": job_id,
            "draft": MARKER,
            schema.GSI1_PK: schema.reviews_partition(TENANT, "decided"),
            schema.GSI1_SK: iso(now),
        }
    )
    services.jobs.table.put_item(Item={**schema.review_token_key(f"rv-{job_id}"), "token": "t"})
    services.jobs.transition(job_id, JobStatus.RUNNING, event="job_started")
    services.jobs.transition(job_id, JobStatus.COMPLETED, event="job_completed")


def _left(table: Any, s3: Any, bucket: str, needles: tuple[str, ...]) -> list[str]:
    found = [
        f"{item['pk']}/{item['sk']}"
        for item in table.scan(ConsistentRead=True)["Items"]
        if any(n in json.dumps(item, default=str) for n in needles)
        and not (item["sk"] == schema.JOB_SK and "erased_at" in item and MARKER not in json.dumps(item, default=str))
    ]
    versions = s3.list_object_versions(Bucket=bucket)
    for entry in (*versions.get("Versions", []), *versions.get("DeleteMarkers", [])):
        if any(n in entry["Key"] for n in needles) or entry["Key"].endswith(UPLOAD):
            found.append(entry["Key"])
    return found


JOB = "job_" + "1" * 28


def test_an_erasure_cut_short_by_a_crash_goes_on_from_its_first_store_not_done(
    services: wiring.Services, table: Any, s3: Any, bucket: str
):
    # Given a finished job with a document, an upload, versioned results, events and a fact derived from it
    _job(services, s3, bucket, JOB)
    assert _left(table, s3, bucket, (MARKER, JOB))
    # When its erasure dies after the artifacts are deleted, before that is recorded
    faults.install(faults.FaultInjector("erase_artifacts=crash-after-side-effectx1", REGISTRY))
    try:
        with pytest.raises(faults.CrashFault):
            erase_job(services, JOB, reason="requested", by=OWNER, tenant_id=TENANT)
        # Then the job is gone for every reader, and its tombstone says the uploads are done
        assert services.jobs.get_job(JOB) is None
        item = table.get_item(Key=schema.job_key(JOB))["Item"]
        assert set(item["erasure_done"]) == {"uploads"} and "gsi1pk" not in item
        # When it is asked again, it goes on (the artifacts again: nothing left to delete) and finishes
        done = erase_job(services, JOB, reason="requested", by=OWNER, tenant_id=TENANT)
    finally:
        faults.install(faults.FaultInjector())
    assert done is not None and done.status == "erased"
    report = {line.store: line.deleted for line in done.report}
    assert list(report) == list(ERASURE_STORES)
    assert report["uploads"] == 1 and report["artifacts"] == 0 and report["memory"] == 1 and report["records"] > 0
    assert report["webhooks"] == 1 and report["reviews"] == 2 and report["streams"] > 0
    # Then nothing of it is left but the tombstone: usage and cost, and the job_erased event
    assert _left(table, s3, bucket, (MARKER, JOB)) == []
    tombstone = table.get_item(Key=schema.job_key(JOB))["Item"]
    assert tombstone["events"][0]["type"] == "job_erased" and tombstone["erasure_complete"]
    assert "cost_micro" in tombstone and "search_text" not in tombstone


def test_another_tenant_cannot_erase_a_job_and_a_running_one_is_cancelled_first(
    services: wiring.Services, s3: Any, bucket: str
):
    _job(services, s3, bucket, JOB)
    assert erase_job(services, JOB, reason="requested", by=OWNER, tenant_id="tenant-b") is None
    running = "job_" + "2" * 28
    services.jobs.create_job(
        NewJob(running, TENANT, "document-analysis", f"work/{running}/input.json", "h", "offline:test", 30)
    )
    with pytest.raises(StillRunning):
        erase_job(services, running, reason="retention", by=OWNER)
    cancelled: list[str] = []
    done = erase_job(services, running, reason="requested", by=OWNER, cancel=cancelled.append)
    assert cancelled == [running] and done is not None and done.cancelled


def test_the_sweep_erases_a_job_whose_retention_ended_and_a_tenant_erasure_the_rest(
    services: wiring.Services, table: Any, s3: Any, bucket: str, clock: Any
):
    _job(services, s3, bucket, JOB, days=1)
    assert sweep_retention(services, clock.now())["retention_erased"] == 0
    clock.advance(timedelta(days=1, seconds=1))
    assert sweep_retention(services, clock.now())["retention_erased"] == 1
    assert table.get_item(Key=schema.job_key(JOB))["Item"]["erasure_reason"] == "retention"
    assert _left(table, s3, bucket, (MARKER, JOB)) == []
    # And a tenant erasure afterwards finds nothing more of that job, and deletes the tenant's own uploads
    s3.put_object(Bucket=bucket, Key=f"uploads/{TENANT}/up_{'cd' * 16}", Body=b"x")
    report = {line.store: line.deleted for line in erase_tenant(services, TENANT, by=OWNER).report}
    assert report["uploads"] == 1 and report["records"] == 0
