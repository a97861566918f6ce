"""Repair through the operator routes: a failed job's input fixed (a merge patch validated as a submission of its
tenant, kept as a new version) and the replay plan that follows from it; a job escalated, updated and cleared."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from typer.testing import CliRunner

from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy
from longhaul.core.contracts import EscalationRequest, JobStatus
from longhaul.operations import repair
from longhaul.operations.repair import diff, merge_patch
from longhaul.services import Services
from longhaul.storage.checkpoints import CheckpointStore
from longhaul.storage.jobs import JobStore, NewJob
from longhaul.workflows import REGISTRY
from longhaul_client.cli import app
from longhaul_client.cli.common import CommandError
from longhaul_client.cli.repair import patch_from_sets
from tests.unit.api_helpers import assert_problem, submit
from tests.unit.conftest import KEY_A, KEY_B, KEY_OPS, CallApi
from tests.unit.test_api_ops import parsed_up_to_the_index, running

pytestmark = pytest.mark.usefixtures("api_keys", "operator_key")
runner = CliRunner()
OPS = KEY_OPS
S = JobStatus


def failed_job(call_api: CallApi, table: Any, checkpoints: CheckpointStore) -> str:
    """A submitted job that got as far as the index and failed at retrieval."""
    job_id = submit(call_api).body["job_id"]
    store = running(table, job_id, started_ago=timedelta(seconds=10), completed=5)
    parsed_up_to_the_index(checkpoints, job_id)
    store.transition(job_id, S.FAILED, event="job_failed")
    return job_id


def events(call_api: CallApi, job_id: str) -> list[dict[str, Any]]:
    return call_api("GET", f"/v1/ops/jobs/{job_id}/events", key=OPS, query={"limit": "200"}).body["events"]


# ---------------------------------------------------------------------- the merge patch


def test_a_merge_patch_replaces_members_removes_nulls_and_replaces_arrays_whole() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "list": [1, 2]}

    patched = merge_patch(target, {"a": "z", "c": {"f": None}, "list": [3]})

    assert patched == {"a": "z", "c": {"d": "e"}, "list": [3]}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "list": [1, 2]}, "the target is not changed"
    assert [(c.path, c.before, c.after) for c in diff(target, patched)] == [
        ("a", "b", "z"),
        ("c/f", "g", None),
        ("list/0", 1, 3),
        ("list/1", 2, None),
    ]


def test_each_step_declares_what_it_reads_and_a_change_invalidates_its_readers() -> None:
    spec = REGISTRY["document-analysis"]

    assert spec.steps_reading(["documents"]) == ("list_documents", "plan_ocr")
    assert spec.steps_reading(["max_passages"]) == ("retrieve_passages",)
    assert spec.steps_reading([]) == ()
    assert REGISTRY["invoice-reconciliation"].steps_reading(["invoices"]) == ("parse_documents",)


# ---------------------------------------------------------------------- fix the input


def test_a_fix_is_a_new_version_and_the_replay_reruns_what_read_the_changed_field(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore, store: JobStore
) -> None:
    # Given a failed job whose documents were parsed and indexed
    job_id = failed_job(call_api, table, checkpoints)
    original_key = store.get_job(job_id).input_key  # type: ignore[union-attr]
    shown = call_api("GET", f"/v1/ops/jobs/{job_id}/input", key=OPS).body
    assert shown["version"] == 1 and shown["input"]["documents"][1]["text"] == "Termination requires written notice."

    # When an operator fixes the second document's text (a merge patch replaces the list whole)
    documents = shown["input"]["documents"]
    documents[1]["text"] = "Termination requires 60 days written notice."
    body = {"patch": {"documents": documents}, "reason": "the tenant sent the wrong notes"}
    fixed = call_api(
        "PATCH",
        f"/v1/ops/jobs/{job_id}/input",
        key=OPS,
        body=body,
        headers={"Content-Type": "application/merge-patch+json"},
    )

    # Then the new version says what changed and which checkpoints no longer hold
    assert fixed.status == 200, fixed.raw_body
    assert fixed.body["input_version"] == 2 and fixed.body["changed"] == ["documents"]
    assert [c["path"] for c in fixed.body["diff"]] == ["documents/1/text"]
    assert fixed.body["invalidated_steps"] == ["list_documents", "plan_ocr"]
    assert fixed.body["replay_from"] == "list_documents"
    job = store.get_job(job_id)
    assert job is not None and job.input_key != original_key and job.input_version == 2
    assert call_api("GET", f"/v1/ops/jobs/{job_id}/input", key=OPS).body["input"]["documents"] == documents
    fix = next(e for e in events(call_api, job_id) if e["type"] == "input_fixed")
    assert fix["detail"]["by"] == "ops" and fix["detail"]["reason"] == "the tenant sent the wrong notes"
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["input_version"] == 2

    # And the replay's plan starts at the first invalidated step and reruns the fan-out over the documents
    plan = call_api("POST", f"/v1/ops/jobs/{job_id}/replay", key=OPS, body={"reason": "fixed", "dry_run": True}).body
    assert plan["from_step"] == "list_documents" and plan["invalidated_steps"] == ["list_documents", "plan_ocr"]
    assert plan["rerun_steps"][:3] == ["list_documents", "parse_documents", "plan_ocr"]
    assert plan["input_version"] == 2


def test_a_replay_from_a_later_step_still_reruns_the_invalidated_ones(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore
) -> None:
    job_id = failed_job(call_api, table, checkpoints)
    body = {"patch": {"question": "What notice does termination need?"}, "reason": "clearer question"}
    assert call_api("PATCH", f"/v1/ops/jobs/{job_id}/input", key=OPS, body=body).status == 200

    plan = call_api(
        "POST",
        f"/v1/ops/jobs/{job_id}/replay",
        key=OPS,
        body={"from_step": "build_index", "reason": "fixed", "dry_run": True},
    ).body

    # (the question is read from retrieval on; the parsed documents and their index are kept)
    assert plan["invalidated_steps"] == [
        "retrieve_passages",
        "extract_evidence",
        "draft_answer",
        "review",
        "publish_result",
    ]
    assert plan["kept_items"] == {"parse_documents": [0], "build_index": [0]}
    assert "list_documents" not in plan["rerun_steps"]


def test_an_invalid_fix_is_a_422_at_its_place_and_changes_nothing(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore, store: JobStore
) -> None:
    job_id = failed_job(call_api, table, checkpoints)
    before = events(call_api, job_id)

    unknown_upload = {"name": "notes.txt", "upload_id": "up_" + "0" * 26}
    patch = {"documents": [{"name": "contract.md", "text": "x"}, unknown_upload]}
    missing = call_api("PATCH", f"/v1/ops/jobs/{job_id}/input", key=OPS, body={"patch": patch, "reason": "new upload"})
    invalid = call_api(
        "PATCH", f"/v1/ops/jobs/{job_id}/input", key=OPS, body={"patch": {"question": ""}, "reason": "oops"}
    )

    problem = assert_problem(missing, 422, "invalid-request")
    assert problem["errors"][0]["loc"] == ["input", "documents", 1, "upload_id"], problem
    problem = assert_problem(invalid, 422, "invalid-request")
    assert problem["errors"][0]["loc"][:2] == ["input", "question"], problem
    assert events(call_api, job_id) == before
    assert store.get_job(job_id).input_version == 1  # type: ignore[union-attr]


def test_another_tenants_upload_does_not_resolve(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore, s3: Any, bucket: str
) -> None:
    job_id = failed_job(call_api, table, checkpoints)
    upload = call_api("POST", "/v1/uploads", key=KEY_B, body={"filename": "notes.txt", "media_type": "text/plain"})
    assert upload.status == 201, upload.raw_body
    s3.put_object(Bucket=bucket, Key=f"uploads/tenant-b/{upload.body['upload_id']}", Body=b"Notice: 60 days.")

    patch = {"documents": [{"name": "notes.txt", "upload_id": upload.body["upload_id"]}]}
    response = call_api("PATCH", f"/v1/ops/jobs/{job_id}/input", key=OPS, body={"patch": patch, "reason": "b's"})

    problem = assert_problem(response, 422, "invalid-request")
    assert problem["errors"][0]["loc"] == ["input", "documents", 0, "upload_id"]


def test_only_a_stopped_jobs_input_is_fixed(call_api: CallApi) -> None:
    job_id = submit(call_api).body["job_id"]  # queued

    response = call_api(
        "PATCH", f"/v1/ops/jobs/{job_id}/input", key=OPS, body={"patch": {"question": "Why?"}, "reason": "not yet"}
    )
    tenant = call_api(
        "PATCH", f"/v1/ops/jobs/{job_id}/input", key=KEY_A, body={"patch": {"question": "Why?"}, "reason": "not yet"}
    )

    assert_problem(response, 409, "not-fixable")
    assert tenant.status == 403
    assert_problem(call_api("GET", "/v1/ops/jobs/job_" + "0" * 28 + "/input", key=OPS), 404, "not-found")


# ---------------------------------------------------------------------- escalate


def test_an_escalation_is_on_the_job_updated_by_a_second_post_and_cleared_with_who(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore, store: JobStore
) -> None:
    job_id = failed_job(call_api, table, checkpoints)

    first = call_api("POST", f"/v1/ops/jobs/{job_id}/escalate", key=OPS, body={"note": "parser crash on PDFs"})
    second = call_api(
        "POST",
        f"/v1/ops/jobs/{job_id}/escalate",
        key=OPS,
        body={"note": "parser crash on scanned PDFs", "link": "https://tickets.example/LH-12"},
    )

    assert first.status == 200 and second.status == 200, second.raw_body
    view = call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body
    assert view["escalation"]["note"] == "parser crash on scanned PDFs"
    assert view["escalation"]["link"] == "https://tickets.example/LH-12" and view["escalation"]["by"] == "ops"
    stored = table.get_item(Key={"pk": f"JOB#{job_id}", "sk": "JOB"})["Item"]["escalation"]
    assert set(stored) == {"by", "at", "note", "link"}

    cleared = call_api("DELETE", f"/v1/ops/jobs/{job_id}/escalate", key=OPS)

    assert cleared.status == 200 and cleared.body == {"job_id": job_id, "escalation": None}
    assert call_api("GET", f"/v1/jobs/{job_id}", key=KEY_A).body["escalation"] is None
    logged = [(e["type"], e["detail"].get("updated")) for e in events(call_api, job_id)]
    assert [t for t in logged if t[0] in ("job_escalated", "escalation_cleared")] == [
        ("job_escalated", False),
        ("job_escalated", True),
        ("escalation_cleared", None),
    ]
    assert "escalation" not in table.get_item(Key={"pk": f"JOB#{job_id}", "sk": "JOB"})["Item"]


def test_an_escalation_without_a_note_or_with_a_bad_link_is_a_422(
    call_api: CallApi, table: Any, checkpoints: CheckpointStore
) -> None:
    job_id = failed_job(call_api, table, checkpoints)

    for body in ({}, {"note": "x" * 10, "link": "javascript:alert(1)"}):
        assert_problem(call_api("POST", f"/v1/ops/jobs/{job_id}/escalate", key=OPS, body=body), 422, "invalid-request")


# ---------------------------------------------------------------------- who is told of an escalation


class Alerts:
    """The alarm topic, as the port sees it."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []

    def publish(self, *, subject: str, message: str, attributes: dict[str, str]) -> None:
        self.published.append({"subject": subject, "message": json.loads(message), "attributes": attributes})


def job_with_callback(services: Services, n: int) -> str:
    job_id = f"job_{n:028x}"
    services.jobs.create_job(
        NewJob(
            job_id,
            "tenant-a",
            "document-analysis",
            f"work/{job_id}/input.json",
            "h",
            "offline:test",
            30,
            callback_url="https://hooks.example.com/longhaul",
            links_base="https://api.example.test/prod",
        )
    )
    services.jobs.transition(job_id, S.FAILED, event="job_failed")
    return job_id


@pytest.mark.parametrize("opted_in", [False, True])
def test_the_alarm_topic_hears_of_every_escalation_and_the_tenant_only_when_its_policy_says_so(
    services: Services, opted_in: bool
) -> None:
    alerts = Alerts()
    s = dataclasses.replace(services, alerts=alerts)
    s.budgets.put_policy("tenant-a", TenantPolicy(webhook_escalations=opted_in))
    job_id = job_with_callback(s, 1)
    failed = s.jobs.get_job(job_id)
    assert failed is not None and failed.callback is not None
    operator = Principal(tenant_id="ops", role="operator")

    repair.escalate(s, operator, job_id, EscalationRequest(note="the parser loops on this PDF"))

    (published,) = alerts.published
    assert published["attributes"] == {"job_id": job_id, "tenant_id": "tenant-a", "event": "job_escalated"}
    assert published["message"]["escalation"]["note"] == "the parser loops on this PDF"
    job = s.jobs.get_job(job_id)
    assert job is not None and job.callback is not None
    if opted_in:
        assert job.callback.event == "job.escalated" and job.callback.webhook_id != failed.callback.webhook_id
        record = s.outbox.get(job.callback.webhook_id)
        assert record is not None and json.loads(record.body)["type"] == "job.escalated"
    else:
        assert job.callback.webhook_id == failed.callback.webhook_id, "no webhook of an escalation"


# ---------------------------------------------------------------------- the command line


def test_set_assignments_become_a_merge_patch_of_the_members_they_change() -> None:
    current = {
        "question": "What notice?",
        "documents": [{"name": "a.txt", "upload_id": "up_1"}, {"name": "b.txt", "text": "B"}],
        "options": {"depth": 8, "rerank": True},
    }

    patch = patch_from_sets(
        current, ["documents.0.upload_id=up_2", "options.rerank=null", "options.depth=12", "question=Why not?"]
    )

    # (a list goes whole, with its change; an object by its changed members; text that is not JSON stays text)
    assert patch == {
        "question": "Why not?",
        "documents": [{"name": "a.txt", "upload_id": "up_2"}, {"name": "b.txt", "text": "B"}],
        "options": {"depth": 12, "rerank": None},
    }
    assert merge_patch(current, patch)["options"] == {"depth": 12}
    with pytest.raises(CommandError, match="not an index"):
        patch_from_sets(current, ["documents.5.upload_id=up_3"])
    with pytest.raises(CommandError, match="change nothing"):
        patch_from_sets(current, ["question=What notice?"])


def test_fix_input_needs_a_change_and_escalate_a_note_or_clear() -> None:
    job = "job_" + "0" * 28
    base = ["--url", "http://api.test", "--key", "k"]

    nothing = runner.invoke(app, ["ops", "fix-input", job, "--reason", "why not", *base])
    both = runner.invoke(app, ["ops", "escalate", job, "--note", "look", "--clear", *base])

    assert nothing.exit_code == 2 and "--set" in nothing.output
    assert both.exit_code == 2 and "--clear" in both.output


def test_a_tenant_opts_in_to_the_escalation_webhook_by_its_policy(call_api: CallApi) -> None:
    before = call_api("GET", "/v1/ops/tenants/tenant-a/policy", key=OPS).body["policy"]["webhook_escalations"]

    changed = call_api("PATCH", "/v1/ops/tenants/tenant-a/policy", key=OPS, body={"webhook_escalations": True})
    refused = call_api("PATCH", "/v1/ops/tenants/tenant-a/policy", key=OPS, body={"webhook_escalations": "yes"})

    assert before is False
    assert changed.status == 200 and changed.body["policy"]["webhook_escalations"] is True, changed.raw_body
    assert refused.status == 422
