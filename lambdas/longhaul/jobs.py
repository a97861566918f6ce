"""The API's use cases: submit a job, create an upload, read status, events and result. Tenant-scoped."""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from botocore.exceptions import ClientError

from longhaul import artifacts as keys
from longhaul import limits
from longhaul.artifacts import ArtifactStore
from longhaul.auth import Principal
from longhaul.clock import iso
from longhaul.contracts import (
    MEDIA_TYPES,
    CancelOutcome,
    DocumentAnalysisInput,
    EventPage,
    EventView,
    Health,
    JobAccepted,
    JobError,
    JobList,
    JobRequest,
    JobResult,
    JobStatus,
    JobView,
    Progress,
    UploadRequest,
    UploadTicket,
    Usage,
)
from longhaul.errors import TransientError
from longhaul.observability import emit, logger
from longhaul.problems import (
    ApiProblem,
    BadRequest,
    IdempotencyKeyReused,
    InvalidRequest,
    NotFound,
    NotReady,
    Unavailable,
)
from longhaul.settings import Settings
from longhaul.store import ACTIVE, BadCursor, IdempotencyConflict, JobStore, NewJob, TransitionRejected
from longhaul.workflows import STEPS, execution_arn

if TYPE_CHECKING:
    from longhaul.wiring import Services

IDEMPOTENCY_KEY = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
JOB_ID = re.compile(r"^job_[0-9a-f]{28}$")


def canonical_hash(request: JobRequest) -> str:
    """Hash of the validated payload: key order and whitespace do not matter."""
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_job_id() -> str:
    """Time-ordered, unguessable, valid as a Step Functions execution name."""
    return f"job_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def estimate_sla_seconds(job_input: DocumentAnalysisInput) -> int:
    inline_chars = sum(len(d.text or "") for d in job_input.documents)
    uploads = sum(1 for d in job_input.documents if d.upload_id)
    return 30 + 5 * len(job_input.documents) + 20 * uploads + inline_chars // 20_000


@dataclass
class JobService:
    store: JobStore
    artifacts: ArtifactStore
    stepfunctions: Any
    settings: Settings

    # ------------------------------------------------------------------ submit

    def submit(
        self, principal: Principal, request: JobRequest, idempotency_key: str | None, base_url: str
    ) -> tuple[JobAccepted, bool]:
        if idempotency_key is not None and not IDEMPOTENCY_KEY.match(idempotency_key):
            raise BadRequest("Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 . _ : -")
        machine = self.settings.workflows.get(request.workflow)
        if machine is None:
            raise InvalidRequest(
                f"workflow {request.workflow!r} is not deployed", allowed_workflows=sorted(self.settings.workflows)
            )
        payload_hash = canonical_hash(request)
        if idempotency_key:
            existing = self.store.find_idempotent(principal.tenant_id, idempotency_key)
            if existing is not None:
                if existing["payload_hash"] != payload_hash:
                    raise IdempotencyKeyReused(job_id=existing["job_id"])
                job = self.store.get_job(existing["job_id"])
                if job is not None:
                    self._ensure_started(job, machine)
                    return self._accepted(job, base_url), False
        documents = self._resolve_documents(principal, request.input)
        deadline = request.deadline_seconds or limits.DEFAULT_DEADLINE_SECONDS
        job_id = new_job_id()
        for document in documents:
            if "text" in document:
                text = document.pop("text")
                document["key"] = self.artifacts.put_bytes(
                    keys.work_key(job_id, "source", f"{document['index']:03d}"),
                    text.encode(),
                    document["media_type"],
                )
        input_key = self.artifacts.put_json(
            keys.input_key(job_id),
            {
                "workflow": request.workflow,
                "question": request.input.question,
                "documents": documents,
                "max_passages": request.input.max_passages,
                "passages_per_group": request.input.passages_per_group,
            },
        )
        try:
            job, created = self.store.create_job(
                NewJob(
                    job_id=job_id,
                    tenant_id=principal.tenant_id,
                    workflow=request.workflow,
                    input_key=input_key,
                    payload_hash=payload_hash,
                    model=f"{self.settings.model_provider}:{self.settings.model_id}",
                    estimated_sla_seconds=estimate_sla_seconds(request.input),
                    idempotency_key=idempotency_key,
                    total_steps=len(STEPS[request.workflow]),
                    deadline_at=iso(self.store.clock.now() + timedelta(seconds=deadline)),
                    deadline_seconds=deadline,
                )
            )
        except IdempotencyConflict as conflict:
            raise IdempotencyKeyReused(job_id=conflict.job_id) from None
        except TransientError as contended:
            raise Unavailable(f"{contended}; retry with the same Idempotency-Key") from None
        try:
            self._ensure_started(job, machine)
        except Unavailable:
            if created:  # nothing is kept of a job that could not start
                self.store.discard_new_job(job)
            raise
        if created:
            emit("JobsSubmitted", workflow=request.workflow)
        return self._accepted(job, base_url), created

    def _resolve_documents(self, principal: Principal, job_input: DocumentAnalysisInput) -> list[dict[str, Any]]:
        documents: list[dict[str, Any]] = []
        problems: list[dict[str, Any]] = []
        for index, doc in enumerate(job_input.documents):
            if doc.text is not None:
                media_type = doc.media_type or (
                    "text/markdown" if doc.name.endswith((".md", ".markdown")) else "text/plain"
                )
                if media_type == "application/pdf":
                    problems.append(
                        {
                            "loc": ["input", "documents", index, "media_type"],
                            "msg": "inline text cannot be a PDF; upload it",
                        }
                    )
                documents.append({"index": index, "name": doc.name, "media_type": media_type, "text": doc.text})
                continue
            assert doc.upload_id is not None
            key = keys.upload_key(principal.tenant_id, doc.upload_id)
            head = self.artifacts.head(key)
            if head is None:
                problems.append(
                    {"loc": ["input", "documents", index, "upload_id"], "msg": "no such upload (or not uploaded yet)"}
                )
                continue
            if head.get("ContentLength", 0) > limits.MAX_UPLOAD_BYTES:
                problems.append(
                    {
                        "loc": ["input", "documents", index, "upload_id"],
                        "msg": f"the upload exceeds {limits.MAX_UPLOAD_BYTES} bytes",
                    }
                )
            media_type = doc.media_type or head.get("ContentType", "application/octet-stream").split(";")[0]
            if media_type not in MEDIA_TYPES:
                problems.append(
                    {
                        "loc": ["input", "documents", index, "media_type"],
                        "msg": f"unsupported media type {media_type!r}; allowed: {', '.join(MEDIA_TYPES)}",
                    }
                )
            documents.append({"index": index, "name": doc.name, "media_type": media_type, "key": key})
        if problems:
            raise InvalidRequest("some documents cannot be used", errors=problems)
        return documents

    def _ensure_started(self, job: dict[str, Any], machine: str) -> None:
        if job["status"] != JobStatus.QUEUED.value:
            return
        state = {
            "job_id": job["job_id"],
            "tenant_id": job["tenant_id"],
            "workflow": job["workflow"],
            "input_key": job["input_key"],
        }
        try:
            self.stepfunctions.start_execution(stateMachineArn=machine, name=job["job_id"], input=json.dumps(state))
        except ClientError as error:
            if error.response["Error"]["Code"] != "ExecutionAlreadyExists":
                raise Unavailable(
                    "the workflow engine did not accept the job; retry with the same Idempotency-Key"
                ) from error

    def _accepted(self, job: dict[str, Any], base_url: str) -> JobAccepted:
        url = f"{base_url}/v1/jobs/{job['job_id']}"
        return JobAccepted(
            job_id=job["job_id"],
            status=JobStatus(job["status"]),
            status_url=url,
            events_url=f"{url}/events",
            result_url=f"{url}/result",
            estimated_sla_seconds=int(job["estimated_sla_seconds"]),
        )

    # ------------------------------------------------------------------ uploads

    def create_upload(self, principal: Principal, request: UploadRequest) -> UploadTicket:
        upload_id = f"up_{uuid.uuid4().hex}"
        url = self.artifacts.presigned_put(
            keys.upload_key(principal.tenant_id, upload_id), request.media_type, limits.UPLOAD_URL_SECONDS
        )
        return UploadTicket(
            upload_id=upload_id,
            upload_url=url,
            headers={"Content-Type": request.media_type},
            expires_in=limits.UPLOAD_URL_SECONDS,
        )

    # ------------------------------------------------------------------ reads

    def _job(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> dict[str, Any]:
        """The principal's job (any tenant's, on an operator route), else a 404: never a 403."""
        tenant = None if any_tenant and principal.role == "operator" else principal.tenant_id
        job = self.store.get_job(job_id, tenant_id=tenant) if JOB_ID.match(job_id) else None
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    def view(self, principal: Principal, job_id: str, now: datetime, *, any_tenant: bool = False) -> JobView:
        job = self._job(principal, job_id, any_tenant=any_tenant)
        progress = Progress(**job.get("progress", {}))
        # Only a job that is moving has an ETA: a finished, stopping or waiting one would see it grow forever.
        if JobStatus(job["status"]) in ACTIVE and job.get("started_at") and 0 < progress.completed < progress.total:
            elapsed = (now - datetime.fromisoformat(job["started_at"].replace("Z", "+00:00"))).total_seconds()
            progress.eta_seconds = int(elapsed / progress.completed * (progress.total - progress.completed))
        else:
            progress.eta_seconds = None
        return to_view(job, progress)

    def list(self, principal: Principal, status: JobStatus | None, limit: int, cursor: str | None = None) -> JobList:
        return page_of_jobs(self.store, tenant_id=principal.tenant_id, status=status, limit=limit, cursor=cursor)

    # ------------------------------------------------------------------ cancel

    def cancel(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> CancelOutcome:
        """Request cancellation, stop the execution, end `cancelled` keeping the completed steps."""
        job = self._job(principal, job_id, any_tenant=any_tenant)
        status = JobStatus(job["status"])
        if status == JobStatus.CANCELLED:
            return self._cancel_outcome(job, "the job was already cancelled")
        if status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.EXPIRED):
            raise AlreadyFinished(
                f"job {job_id} is already {status.value}; there is nothing to cancel", job_status=status.value
            )
        if status != JobStatus.CANCEL_REQUESTED:
            try:
                self.store.transition(
                    job_id,
                    JobStatus.CANCEL_REQUESTED,
                    event="cancel_requested",
                    detail={"by": principal.tenant_id, "role": principal.role},
                    allowed_from=[JobStatus.QUEUED, *ACTIVE, JobStatus.WAITING_FOR_REVIEW],
                )
            except TransitionRejected:  # it moved meanwhile: answer for its new status
                return self.cancel(principal, job_id, any_tenant=any_tenant)
        machine = self.settings.workflows.get(job["workflow"])
        if machine:
            try:
                self.stepfunctions.stop_execution(
                    executionArn=execution_arn(machine, job["execution_name"]),
                    error="JobCancelled",
                    cause=f"cancelled by {principal.tenant_id}",
                )
            except ClientError as error:
                if error.response["Error"]["Code"] != "ExecutionDoesNotExist":
                    raise Unavailable(
                        "the cancellation is recorded but the execution could not be stopped yet; "
                        "the sweep will finish it, or cancel again"
                    ) from error
        outcome = self._cancel_outcome(self.store.get_job(job_id) or job, "cancelled")
        try:
            self.store.transition(
                job_id,
                JobStatus.CANCELLED,
                event="job_cancelled",
                detail={"completed_steps": outcome.completed_steps, "side_effects": outcome.side_effects},
                set_fields={"current_step": None},
            )
        except TransitionRejected:
            latest = self.store.get_job(job_id) or job
            return self._cancel_outcome(latest, f"the job ended {latest['status']} before the cancellation took hold")
        return outcome.model_copy(update={"status": JobStatus.CANCELLED})

    def _cancel_outcome(self, job: dict[str, Any], message: str) -> CancelOutcome:
        records = self.store.steps(job["job_id"])
        done = [r for r in records if r.get("status") == "succeeded"]
        completed = [s for s in STEPS[job["workflow"]] if any(r["step"] == s and r.get("item") is None for r in done)]
        items = sorted(int(r["item"]) for r in done if r.get("item") is not None)
        effects = [f"artifacts of {step} kept" for step in completed]
        if items:
            effects.append(f"{len(items)} fan-out item(s) committed: {items}")
        charges = self.store.charges(job["job_id"])
        if charges:
            effects.append(f"{len(charges)} model call(s) charged")
        return CancelOutcome(
            job_id=job["job_id"],
            status=JobStatus(job["status"]),
            message=message,
            completed_steps=completed,
            side_effects=effects,
        )

    def events(
        self, principal: Principal, job_id: str, cursor: str | None, limit: int, *, any_tenant: bool = False
    ) -> EventPage:
        self._job(principal, job_id, any_tenant=any_tenant)
        try:
            after = int(cursor) if cursor else 0
        except ValueError:
            raise BadRequest("cursor must be a value returned as next_cursor") from None
        items, next_seq = self.store.list_events(job_id, after=after, limit=limit)
        return EventPage(
            events=[EventView.model_validate(i) for i in items],
            next_cursor=str(next_seq) if next_seq is not None else None,
        )

    def result(self, principal: Principal, job_id: str) -> JobResult:
        job = self._job(principal, job_id)
        if job["status"] != JobStatus.COMPLETED.value:
            raise NotReady(f"job {job_id} is {job['status']}", job_status=job["status"])
        return JobResult.model_validate(self.artifacts.get_json(job["result_key"]))


class AlreadyFinished(ApiProblem):
    status, slug, title = 409, "already-finished", "The job has already finished"


def readiness(services: Callable[[], Services], *, version: str) -> Health:
    """Ready when the configuration loads and the jobs table answers; says nothing about what is wrong."""
    checks: dict[str, Literal["ok", "failed"]] = {"configuration": "failed", "table": "failed"}
    try:
        store = services().store
        checks["configuration"] = "ok"
        store.get_job("job_health_probe")  # a read of an item that never exists
        checks["table"] = "ok"
    except Exception:
        logger.exception("not ready")
    ready = all(v == "ok" for v in checks.values())
    return Health(status="ok" if ready else "unavailable", version=version, checks=checks)


def page_of_jobs(
    store: JobStore, *, tenant_id: str | None, status: JobStatus | None, limit: int, cursor: str | None
) -> JobList:
    try:
        jobs, next_cursor = store.page_jobs(tenant_id=tenant_id, status=status, limit=limit, cursor=cursor)
    except BadCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None
    return JobList(jobs=[to_view(j) for j in jobs], next_cursor=next_cursor)


def to_view(job: dict[str, Any], progress: Progress | None = None) -> JobView:
    return JobView(
        job_id=job["job_id"],
        workflow=job["workflow"],
        status=JobStatus(job["status"]),
        current_step=job.get("current_step"),
        progress=progress or Progress(**job.get("progress", {})),
        attempts=int(job.get("attempts") or 1),
        model=job["model"],
        usage=Usage(
            input_tokens=int(job.get("usage_input_tokens", 0)), output_tokens=int(job.get("usage_output_tokens", 0))
        ),
        created_at=job["created_at"],
        updated_at=job["updated_at"],
        started_at=job.get("started_at"),
        finished_at=job.get("finished_at"),
        deadline_at=job.get("deadline_at"),
        error=JobError(**job["error"]) if job.get("error") else None,
    )
