"""The API's use cases: submit a job, create an upload, read status, events and result, cancel. Tenant-scoped.

Submission is the workflow's own (`WorkflowSpec.prepare`: checks, document resolution, SLA estimate); this module
does what every workflow shares: idempotency, the job record, starting its execution through the engine port.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

from longhaul.api.chains import cancel_children, children_of, principal_of, then_problems
from longhaul.api.graph import DefinitionUnreadable, EngineNotAnswering, WorkflowGraph, job_graph
from longhaul.api.updates import AlreadyFinished, agent_problems, check_supersedes, supersede, update_job
from longhaul.core import correlation, limits, schema, tracing
from longhaul.core.addresses import UnsafeCallback, check_url, system_resolver
from longhaul.core.auth import Principal
from longhaul.core.budgets import TenantPolicy, job_limits, to_micro, usd
from longhaul.core.clock import iso
from longhaul.core.contracts import (
    IDEMPOTENCY_KEY_PATTERN,
    TERMINAL_STATUSES,
    CancelOutcome,
    EventPage,
    EventView,
    Health,
    JobAccepted,
    JobList,
    JobRequestBase,
    JobStatus,
    JobTiming,
    JobTrigger,
    JobUpdate,
    JobView,
    PageText,
    ResultDownload,
    StepUsage,
    UploadRequest,
    UploadTicket,
)
from longhaul.core.errors import TransientError
from longhaul.core.eta import EtaSnapshot, snapshot
from longhaul.core.observability import emit, logger
from longhaul.core.ports import EngineUnavailable
from longhaul.core.problems import (
    BadRequest,
    DailyAllowanceExhausted,
    IdempotencyKeyReused,
    InvalidRequest,
    JobErased,
    NoProvisionalResult,
    NotFound,
    NotReady,
    RateLimited,
    Unavailable,
)
from longhaul.core.records import JOB_ID, Charge, Job
from longhaul.core.timing import job_timing
from longhaul.documents.intake import Intake, PreparedInput
from longhaul.engine.spec import ITEM_KINDS, WorkflowSpec
from longhaul.operations.admission import Admission
from longhaul.operations.costs import with_transitions
from longhaul.services import Services
from longhaul.storage import artifacts as keys
from longhaul.storage.admission import SubmissionState, rate_decision
from longhaul.storage.dynamo import backoff
from longhaul.storage.jobs import ACTIVE, EVENT_PAGE_MAX, IdempotencyConflict, NewJob, TransitionRejected
from longhaul.storage.listing import BadCursor, JobFilter, search_text, strings_of
from longhaul.storage.submissions import StateChanged
from longhaul.workflows import REGISTRY

IDEMPOTENCY_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)
# A job's timing reads at most this many pages of its events (a huge fan-out's later events are not counted).
TIMING_EVENT_PAGES = 20
SUBMISSION_TRIES = 8  # transactions a submission tries when concurrent ones change its tenant's rate window or slots


def canonical_hash(request: BaseModel) -> str:
    """Hash of the validated payload: key order and whitespace do not matter."""
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def new_job_id() -> str:
    """Time-ordered, unguessable, valid as a Step Functions execution name."""
    return f"job_{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


class LongPoll(NamedTuple):
    """How a long-poll of the event log waits: it reads the log again after `first` seconds, then after twice as long
    each time, up to `longest`; so a new event is answered at most `longest` (plus one read) after it was written, and a
    wait of 20 s costs about 45 reads (a consistent Query of an empty range: one read unit each)."""

    first: float = 0.05
    longest: float = 0.5
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic


@dataclass
class JobService:
    services: Services
    long_poll: LongPoll = field(default_factory=LongPoll)

    # ------------------------------------------------------------------ submit

    def submit(
        self,
        principal: Principal,
        request: JobRequestBase,
        idempotency_key: str | None,
        base_url: str,
        *,
        trigger: JobTrigger | None = None,
    ) -> tuple[JobAccepted, bool]:
        """`_submit` in the root span of the job's trace (its id derived from the request's correlation id); a job
        that a schedule or trigger started names it (`trigger`)."""
        attributes = {tracing.TENANT_ID: principal.tenant_id, tracing.WORKFLOW: request.workflow}
        with tracing.job_trace(correlation.current(), "submit job", attributes, root=True) as span:
            accepted, created = self._submit(principal, request, idempotency_key, base_url, trigger=trigger)
            if span is not None:
                span.set_attributes({tracing.JOB_ID: accepted.job_id, "longhaul.created": created})
            return accepted, created

    def submit_as(
        self,
        tenant_id: str,
        request: JobRequestBase,
        idempotency_key: str,
        *,
        parent_job_id: str | None = None,
        parent_step: str | None = None,
    ) -> tuple[JobAccepted, bool]:
        """A submission the platform makes for a tenant (a child step's job, a chained `then`), through the same
        admission path as the tenant's own, idempotent by `idempotency_key`."""
        return self._submit(
            principal_of(tenant_id),
            request,
            idempotency_key,
            "",
            parent_job_id=parent_job_id,
            parent_step=parent_step,
        )

    def _submit(
        self,
        principal: Principal,
        request: JobRequestBase,
        idempotency_key: str | None,
        base_url: str,
        *,
        parent_job_id: str | None = None,
        parent_step: str | None = None,
        trigger: JobTrigger | None = None,
    ) -> tuple[JobAccepted, bool]:
        """Accept a job: one read of what the submission decides on (`AdmissionStore.submission_state`), its input
        written (one object, and one for its inline texts), then the job, its idempotency record, its rate count and
        its slot or place in the queue in one transaction; then its start or its queue's message. The caller's key
        and its tenant's policy come from the function's short-lived cache (`storage/cache.py`)."""
        s = self.services
        if idempotency_key is not None and not IDEMPOTENCY_KEY.match(idempotency_key):
            raise BadRequest("Idempotency-Key must be 1-128 characters of A-Z a-z 0-9 . _ : -")
        if request.workflow not in s.settings.workflows or request.workflow not in REGISTRY:
            raise InvalidRequest(
                f"workflow {request.workflow!r} is not deployed", allowed_workflows=sorted(s.settings.workflows)
            )
        spec = REGISTRY[request.workflow]
        with tracing.span("validate submission"):
            self._check_callback(request.callback_url)
            if request.supersedes is not None:
                check_supersedes(s, principal, request.supersedes)
            if request.then is not None:
                problems = then_problems(request.then, s.settings.workflows)
                if problems:
                    raise InvalidRequest("the job `then` chains is not valid", errors=problems)
        payload_hash = canonical_hash(request)
        tenant_id = principal.tenant_id
        policy = s.budgets.recent_policy(tenant_id)
        admission = Admission(s)
        job_id = new_job_id()
        prepared: PreparedInput | None = None
        input_key = ""
        for tries in range(SUBMISSION_TRIES):
            state = s.admission.submission_state(
                tenant_id,
                usage_key=schema.tenant_usage_key(tenant_id, s.budgets.day()),
                idempotency_key=schema.idempotency_key(tenant_id, idempotency_key) if idempotency_key else None,
            )
            # An idempotent retry of an accepted job is answered before the rate limit: it is not a new submission.
            with tracing.span("idempotency", {"longhaul.idempotency_key_given": idempotency_key is not None}):
                existing = s.jobs.idempotency_record(state.idempotency)
            if existing is not None:
                if existing.payload_hash != payload_hash:
                    raise IdempotencyKeyReused(job_id=existing.job_id)
                found = s.jobs.get_job(existing.job_id)
                if found is not None:
                    waits = self._ensure_started(found, policy)
                    if found.supersedes is not None:  # (a retry finishes what a crash interrupted; never twice)
                        self._supersede(principal, found)
                    return self._accepted(found, base_url, waits), False
            retry_after, rate = rate_decision(state.window, policy.submissions_per_minute, s.now().timestamp())
            if retry_after is not None:
                raise RateLimited(
                    f"tenant {tenant_id} may submit {policy.submissions_per_minute} jobs a minute; "
                    f"retry in {retry_after} s",
                    retry_after_seconds=retry_after,
                    submissions_per_minute=policy.submissions_per_minute,
                )
            budget_tokens, budget_cost = self._admit(tenant_id, request, policy, state)
            if prepared is None:
                with tracing.span("validate input"):
                    intake = Intake(
                        job_id=job_id,
                        tenant_id=tenant_id,
                        artifacts=s.artifacts,
                        jobs=s.jobs,
                        parent_job_id=parent_job_id,
                    )
                    prepared = spec.prepare()(intake, request.input)
                    input_key = intake.store(prepared)  # raises the problems `prepare` found; writes only when none
            eta = job_eta(s, spec, request.sla_class, prepared.size)
            sla_seconds = history_sla_seconds(eta, prepared.estimated_sla_seconds)
            planned = admission.plan_new(tenant_id, sla_seconds, policy, state.counters)
            deadline = request.deadline_seconds or spec.deadline_default_seconds
            try:
                with tracing.span("submission transaction", {tracing.JOB_ID: job_id, "longhaul.try": tries + 1}):
                    job, created = s.jobs.create_job(
                        NewJob(
                            job_id=job_id,
                            tenant_id=tenant_id,
                            workflow=spec.name,
                            input_key=input_key,
                            payload_hash=payload_hash,
                            model=f"{s.settings.model_provider}:{s.settings.model_id}",
                            estimated_sla_seconds=sla_seconds,
                            idempotency_key=idempotency_key,
                            total_steps=len(spec.steps),
                            deadline_at=iso(s.now() + timedelta(seconds=deadline)),
                            deadline_seconds=deadline,
                            budget_tokens=budget_tokens,
                            budget_cost_micro=budget_cost,
                            route=request.route,
                            review_mode=request.review.mode if request.review else None,
                            review_deadline_seconds=request.review.deadline_seconds if request.review else None,
                            callback_url=request.callback_url,
                            links_base=base_url if request.callback_url else None,
                            sla_class=request.sla_class,
                            model_lane=request.model_lane,
                            correlation_id=correlation.current(),
                            # pinned now, from the policy in force: only an update of the job changes them
                            agent_max_turns=(request.agent and request.agent.max_turns) or policy.agent_max_turns,
                            agent_max_tool_calls=(request.agent and request.agent.max_tool_calls)
                            or policy.agent_max_tool_calls,
                            eta=eta,
                            retain_until=iso(s.now() + timedelta(days=policy.retention_days)),
                            supersedes=request.supersedes,
                            search_text=search_text(strings_of(request.input.model_dump(mode="json"))),
                            parent_job_id=parent_job_id,
                            parent_step=parent_step,
                            then=request.then.model_dump_json() if request.then is not None else None,
                            trigger=trigger.model_dump(mode="json", exclude_none=True) if trigger else None,
                        ),
                        marks=planned.marks,
                        with_writes=[s.admission.rate_write(tenant_id, rate), *planned.writes],
                    )
            except StateChanged:  # a concurrent submission changed the rate window or the counters: decide again
                backoff(tries)
                continue
            except IdempotencyConflict as conflict:
                raise IdempotencyKeyReused(job_id=conflict.job_id) from None
            except TransientError as contended:
                raise Unavailable(f"{contended}; retry with the same Idempotency-Key") from None
            break
        else:
            raise Unavailable("the tenant's submissions stayed contended; retry with the same Idempotency-Key")
        try:
            waits = admission.admit_new(job, policy, planned) if created else self._ensure_started(job, policy)
        except EngineUnavailable as error:
            if created:  # nothing is kept of a job that could not start
                s.jobs.discard_new_job(job)
            raise Unavailable("the workflow engine did not accept the job; retry with the same Idempotency-Key") from (
                error
            )
        if created:
            emit("JobsSubmitted", workflow=spec.name)
        if job.supersedes is not None:
            self._supersede(principal, job)
        return self._accepted(job, base_url, waits), created

    def _supersede(self, principal: Principal, successor: Job) -> None:
        """The job `successor` replaces: cancelled (reason `superseded`) if it has not finished, else marked; once."""
        assert successor.supersedes is not None
        old = self.services.jobs.get_job(successor.supersedes, tenant_id=principal.tenant_id)
        if old is None or old.superseded_by == successor.job_id:
            return
        supersede(self.services, old, successor.job_id)
        if not old.finished and old.status != JobStatus.CANCELLED:
            try:
                self.cancel(principal, old.job_id, reason="superseded")
            except AlreadyFinished:  # it finished meanwhile: it keeps its result, marked
                pass
            except Unavailable:  # recorded as cancel_requested: the sweep finishes it
                logger.warning("superseded job not stopped yet", extra={"job_id": old.job_id})

    # ------------------------------------------------------------------ update

    def update(self, principal: Principal, job_id: str, change: JobUpdate, *, any_tenant: bool = False) -> JobView:
        """Change a job's deadline, budget, class, review, instructions or agent limits (`longhaul.api.updates`)."""
        update_job(self.services, principal, self.job(principal, job_id, any_tenant=any_tenant), change)
        return self.view(principal, job_id, any_tenant=any_tenant)

    def _admit(
        self, tenant_id: str, request: JobRequestBase, policy: TenantPolicy, state: SubmissionState
    ) -> tuple[int, int]:
        """The job's budget within the tenant's policy (422 above a ceiling, for a route or an SLA class it may not
        use), and the tenant's daily allowance not spent (429, on the day's spending read with the submission):
        checked before any work."""
        s = self.services
        tokens, cost, problems = job_limits(request.budget, policy)
        problems += agent_problems(request.agent, policy)
        if request.sla_class not in policy.sla_classes:
            problems.append(
                {"loc": ["body", "sla_class"], "msg": f"not an SLA class this tenant may use: {policy.sla_classes}"}
            )
        if request.route is not None:
            allowed = sorted(policy.routes if policy.routes is not None else s.routing.routes)
            if request.route not in allowed or request.route not in s.routing.routes:
                problems.append({"loc": ["body", "route"], "msg": f"not a route this tenant may use: {allowed}"})
        if problems:
            raise InvalidRequest(
                "the job's budget, route, SLA class or agent limits are not within the tenant's policy",
                errors=problems,
                **({"allowed_sla_classes": policy.sla_classes} if request.sla_class not in policy.sla_classes else {}),
            )
        daily_cost = to_micro(policy.daily_cost_usd)
        if state.day_tokens >= policy.daily_tokens or state.day_cost_micro >= daily_cost:
            midnight = datetime.combine(s.now().date() + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
            raise DailyAllowanceExhausted(
                f"tenant {tenant_id} has spent its daily allowance ({state.day_tokens} of {policy.daily_tokens} "
                f"tokens, {usd(state.day_cost_micro)} of {policy.daily_cost_usd} USD); it renews at {iso(midnight)}",
                renews_at=iso(midnight),
                retry_after_seconds=max(1, int((midnight - s.now()).total_seconds())),
            )
        return tokens, cost

    def allowed_sla_classes(self, principal: Principal) -> list[str]:
        """The SLA classes the caller's tenant may use (its policy's)."""
        return list(self.services.budgets.recent_policy(principal.tenant_id).sla_classes)

    def _check_callback(self, url: str | None) -> None:
        """A callback URL must be https to a public address (resolved now, and again at every delivery)."""
        if url is None:
            return
        try:
            check_url(url, allowlist=self.services.settings.callback_allowlist, resolver=system_resolver)
        except UnsafeCallback as unsafe:
            raise InvalidRequest(
                "the callback URL is not allowed",
                errors=[{"loc": ["body", "callback_url"], "msg": str(unsafe), "type": "unsafe_callback"}],
            ) from None

    def _ensure_started(self, job: Job, policy: TenantPolicy) -> int:
        """Start the job now if admission allows, else leave it waiting for a slot: the estimated seconds to start."""
        try:
            return Admission(self.services).admit(job, policy)
        except EngineUnavailable as error:
            raise Unavailable("the workflow engine did not accept the job; retry with the same Idempotency-Key") from (
                error
            )

    def _accepted(self, job: Job, base_url: str, estimated_start_seconds: int = 0) -> JobAccepted:
        url = f"{base_url}/v1/jobs/{job.job_id}"
        return JobAccepted(
            job_id=job.job_id,
            status=job.status,
            status_url=url,
            events_url=f"{url}/events",
            result_url=f"{url}/result",
            estimated_sla_seconds=job.estimated_sla_seconds,
            estimated_start_seconds=estimated_start_seconds,
        )

    # ------------------------------------------------------------------ uploads

    def create_upload(self, principal: Principal, request: UploadRequest) -> UploadTicket:
        upload_id = f"up_{uuid.uuid4().hex}"
        url = self.services.artifacts.presigned_put(
            keys.upload_key(principal.tenant_id, upload_id), request.media_type, limits.UPLOAD_URL_SECONDS
        )
        return UploadTicket(
            upload_id=upload_id,
            upload_url=url,
            headers={"Content-Type": request.media_type},
            expires_in=limits.UPLOAD_URL_SECONDS,
        )

    # ------------------------------------------------------------------ reads

    def job(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> Job:
        """The principal's job (any tenant's, for an operator on an operator route), else a 404: never a 403."""
        tenant = None if any_tenant and principal.role == "operator" else principal.tenant_id
        job = self.services.jobs.get_job(job_id, tenant_id=tenant) if JOB_ID.match(job_id) else None
        if job is None:
            from longhaul.operations.erasure import erased_at  # a missing job's only: not every cold start's import

            gone = erased_at(self.services, job_id, tenant_id=tenant) if JOB_ID.match(job_id) else None
            if gone is not None:
                raise JobErased(f"job {job_id} was erased at {iso(gone)}", erased_at=iso(gone))
            raise NotFound(f"no job {job_id!r}")
        if job.retain_until is not None and job.retain_until <= self.services.now():
            raise JobErased(
                f"job {job_id}'s retention ended at {iso(job.retain_until)}; it is erased",
                erased_at=iso(job.retain_until),
            )
        return job

    def view(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> JobView:
        """The job, with its budget spent per step (from the job's ledger) and its cost (transitions counted once
        its executions have ended)."""
        job = with_transitions(self.services, self.job(principal, job_id, any_tenant=any_tenant))
        view = job.view(now=self.services.now())
        view.timing = self.timing(job)
        if view.budget is not None:
            steps = step_usage(self.services.budgets.ledger(job_id))
            view = view.model_copy(update={"budget": view.budget.model_copy(update={"steps": steps})})
        if job.children:
            view = view.model_copy(update={"children": children_of(self.services, job)})
        return view

    def timing(self, job: Job) -> JobTiming:
        """Where the job's time went, from its record and its event log (pages of events; no trace read)."""
        events: list[EventView] = []
        after: int | None = 0
        for _ in range(TIMING_EVENT_PAGES):
            page, after = self.services.jobs.list_events(job.job_id, after=after or 0, limit=EVENT_PAGE_MAX)
            events.extend(page)
            if after is None or not page:
                break
        return job_timing(
            events,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            now=self.services.now(),
        )

    def list(
        self,
        principal: Principal,
        status: JobStatus | None,
        limit: int,
        cursor: str | None = None,
        narrow: JobFilter | None = None,
    ) -> JobList:
        """The tenant's jobs, newest first, narrowed by `narrow` (`storage.listing.JobFilter`)."""
        return page_of_jobs(
            self.services, tenant_id=principal.tenant_id, status=status, limit=limit, cursor=cursor, narrow=narrow
        )

    def events(
        self,
        principal: Principal,
        job_id: str,
        cursor: str | None,
        limit: int,
        *,
        any_tenant: bool = False,
        wait_seconds: float = 0,
    ) -> EventPage:
        """The job's events after `cursor` (the `seq` of the last event the caller has, or a `next_cursor`).

        With `wait_seconds`, a long-poll: when there is no event after the cursor yet, the log is read again with
        back-off until one is written (answered at once) or the wait is over (an empty page). A finished job is
        answered at once: nothing more is coming unless an operator replays it."""
        job = self.job(principal, job_id, any_tenant=any_tenant)
        try:
            after = int(cursor) if cursor else 0
        except ValueError:
            raise BadRequest("cursor must be a value returned as next_cursor") from None
        events, next_seq = self.services.jobs.list_events(job_id, after=after, limit=limit)
        if not events and wait_seconds > 0 and job.status not in TERMINAL_STATUSES:
            events, next_seq = _long_poll(self.services, self.long_poll, job_id, after, limit, wait_seconds)
        if job.correlation_id:  # every event of the job carries its correlation id
            events = [e.model_copy(update={"correlation_id": job.correlation_id}) for e in events]
        return EventPage(events=events, next_cursor=str(next_seq) if next_seq is not None else None)

    def graph(self, principal: Principal, job_id: str, *, any_tenant: bool = False) -> WorkflowGraph:
        """The job's workflow as a graph, each state with this job's status (`longhaul.api.graph`)."""
        job = self.job(principal, job_id, any_tenant=any_tenant)
        try:
            return job_graph(self.services, job)
        except (EngineUnavailable, DefinitionUnreadable):
            logger.exception("the workflow graph could not be read", extra={"job_id": job_id})
            raise EngineNotAnswering("the workflow's definition or history could not be read; try again") from None

    def page(self, principal: Principal, job_id: str, document: str, page: int) -> PageText:
        """A page of the job's document as its steps read it (where a citation's quote is shown)."""
        job = self.job(principal, job_id)
        try:
            read: Callable[..., PageText | None] = REGISTRY[job.workflow].hook("page_text")
        except AttributeError:
            raise NotFound(f"a {job.workflow} job keeps no page text") from None
        found = read(self.services, job, document, page)
        if found is None:
            raise NotFound(f"job {job_id} has no page {page} of {document!r} (or its intermediate files expired)")
        return found

    def result(self, principal: Principal, job_id: str, *, provisional: bool = False) -> BaseModel:
        """The completed job's result; with `provisional`, before completion, its provisional result (see
        `provisional_result`)."""
        return self.result_of(self.job(principal, job_id), provisional=provisional)[0]

    def result_of(self, job: Job, *, provisional: bool = False) -> tuple[BaseModel, str | None]:
        """The job's result and, when it is provisional, the step it is as of (None: the final result)."""
        result_type = REGISTRY[job.workflow].result_type
        if job.status == JobStatus.COMPLETED and job.result_key is not None:
            return result_type.model_validate(self.services.artifacts.get_json(job.result_key)), None
        if not provisional:
            raise NotReady(f"job {job.job_id} is {job.status.value}", job_status=job.status.value)
        if job.finished or job.provisional_key is None or job.provisional_step is None:
            what = "it ended without a result" if job.finished else "no step of it has given one yet"
            raise NoProvisionalResult(
                f"job {job.job_id} is {job.status.value}: {what}",
                job_status=job.status.value,
                provisional_steps=[s.name for s in REGISTRY[job.workflow].steps if s.provisional],
            )
        found = result_type.model_validate(self.services.artifacts.get_json(job.provisional_key))
        return found, job.provisional_step

    # ------------------------------------------------------------------ downloads

    def download(
        self, principal: Principal, job_id: str, *, media: str = "json", expires_in: int | None = None
    ) -> ResultDownload:
        """A presigned GET of the completed job's result (`json`: the result the workflow wrote; `markdown`: its
        rendering), living `expires_in` seconds (default 900), at most the tenant policy's `download_ttl_seconds` and
        the deployment's `LONGHAUL_MAX_DOWNLOAD_TTL_SECONDS`. 409 before the job completes; 404 for a rendering the
        workflow does not write."""
        job = self.job(principal, job_id)
        if job.status != JobStatus.COMPLETED or job.result_key is None:
            raise NotReady(f"job {job_id} is {job.status.value}", job_status=job.status.value)
        return self.download_of(job, media=media, expires_in=expires_in)

    def download_of(self, job: Job, *, media: str = "json", expires_in: int | None = None) -> ResultDownload:
        s = self.services
        key = job.result_key if media == "json" else keys.result_key(job.job_id, "md")
        head = s.artifacts.head(key) if key else None
        if key is None or head is None:
            raise NotFound(f"job {job.job_id} has no {media} rendering of its result")
        policy = s.budgets.recent_policy(job.tenant_id)
        ttl = min(expires_in or limits.DOWNLOAD_URL_SECONDS, policy.download_ttl_seconds)
        ttl = min(ttl, s.settings.max_download_ttl_seconds)
        now = s.now()
        return ResultDownload(
            url=s.artifacts.presigned_get(key, ttl),
            expires_at=now.replace(microsecond=0) + timedelta(seconds=ttl),
            media_type="application/json" if media == "json" else "text/markdown",
            bytes=int(head.get("ContentLength") or 0),
        )

    def oversized(self, job: Job, *, media: str) -> ResultDownload | None:
        """The download of a completed job's result (or rendering) too large to answer inline
        (`LONGHAUL_RESULT_INLINE_MAX_BYTES`), else None."""
        key = job.result_key if media == "json" else keys.result_key(job.job_id, "md")
        if job.status != JobStatus.COMPLETED or key is None:
            return None
        size = self.services.artifacts.size(key)
        if size is None or size <= self.services.settings.result_inline_max_bytes:
            return None
        return self.download_of(job, media=media)

    # ------------------------------------------------------------------ cancel

    def cancel(
        self, principal: Principal, job_id: str, *, any_tenant: bool = False, reason: str | None = None
    ) -> CancelOutcome:
        """Request cancellation, stop the execution, end `cancelled` keeping the completed steps. `reason` (e.g.
        `superseded`) is recorded in the events of the cancellation."""
        because = {"reason": reason} if reason else {}
        s = self.services
        job = self.job(principal, job_id, any_tenant=any_tenant)
        if job.status == JobStatus.CANCELLED:
            return self._cancel_outcome(job, "the job was already cancelled")
        if job.status in (JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.EXPIRED):
            raise AlreadyFinished(
                f"job {job_id} is already {job.status.value}; there is nothing to cancel", job_status=job.status.value
            )
        if job.status != JobStatus.CANCEL_REQUESTED:
            try:
                s.jobs.transition(
                    job_id,
                    JobStatus.CANCEL_REQUESTED,
                    event="cancel_requested",
                    detail={"by": principal.tenant_id, "role": principal.role, **because},
                    allowed_from=[JobStatus.QUEUED, *ACTIVE, JobStatus.WAITING_FOR_REVIEW, JobStatus.PAUSED],
                )
            except TransitionRejected:  # it moved meanwhile: answer anew
                return self.cancel(principal, job_id, any_tenant=any_tenant, reason=reason)
        try:
            s.engine.stop(
                job.workflow,
                job.execution_name,
                error="JobCancelled",
                cause=f"{reason} by {principal.tenant_id}" if reason else f"cancelled by {principal.tenant_id}",
            )
        except EngineUnavailable:
            raise Unavailable(
                "the cancellation is recorded but the execution could not be stopped yet; "
                "the sweep will finish it, or cancel again"
            ) from None
        if job.children:  # its children stop with it
            tenant = Principal(tenant_id=job.tenant_id, role=principal.role, key_id=principal.key_id)
            cancel_children(lambda child: self.cancel(tenant, child, reason="parent_cancelled"), job)
        # A running job's cancellation: the review lane and the container tasks (not every cold start's import).
        from longhaul.operations.sweep import stop_container_tasks
        from longhaul.review.lane import close_for_stopped_job

        review = close_for_stopped_job(s, s.jobs.get_job(job_id) or job, "cancelled")
        stop_container_tasks(s, job_id, reason=f"job cancelled by {principal.tenant_id}")
        outcome = self._cancel_outcome(s.jobs.get_job(job_id) or job, "cancelled")
        try:
            s.jobs.transition(
                job_id,
                JobStatus.CANCELLED,
                event="job_cancelled",
                detail={"completed_steps": outcome.completed_steps, "side_effects": outcome.side_effects, **because},
                set_fields={"current_step": None, **({"review": review} if review else {})},
            )
        except TransitionRejected:
            latest = s.jobs.get_job(job_id) or job
            return self._cancel_outcome(
                latest, f"the job ended {latest.status.value} before the cancellation took hold"
            )
        return outcome.model_copy(update={"status": JobStatus.CANCELLED})

    def _cancel_outcome(self, job: Job, message: str) -> CancelOutcome:
        done = [r for r in self.services.checkpoints.steps(job.job_id) if r.succeeded]
        names = REGISTRY[job.workflow].step_names
        completed = [n for n in names if any(r.step == n and r.item is None for r in done)]
        items = sorted(r.item for r in done if r.item is not None)
        effects = [f"artifacts of {step} kept" for step in completed]
        if items:
            effects.append(f"{len(items)} fan-out item(s) committed: {items}")
        charges = [c for c in self.services.checkpoints.charges(job.job_id) if c.status == "settled"]
        if charges:
            effects.append(f"{len(charges)} model call(s) charged")
        made = [e for e in self.services.effects.of_job(job.job_id) if e.acted and e.status != "failed"]
        effects += [f"{e.tool} {e.operation_id} ({e.status}; {e.side_effect})" for e in made]
        if any(e.compensation for e in made):
            effects.append("side effects with a compensation are undone in reverse order: see the job's compensation")
        return CancelOutcome(
            job_id=job.job_id, status=job.status, message=message, completed_steps=completed, side_effects=effects
        )


def _long_poll(
    services: Services, poll: LongPoll, job_id: str, after: int, limit: int, wait_seconds: float
) -> tuple[list[EventView], int | None]:
    """Read the events after `after` again, with back-off, until there are some or `wait_seconds` have passed."""
    deadline = poll.monotonic() + wait_seconds
    delay = poll.first
    while (remaining := deadline - poll.monotonic()) > 0:
        poll.sleep(min(delay, remaining))
        delay = min(delay * 2, poll.longest)
        events, next_seq = services.jobs.list_events(job_id, after=after, limit=limit)
        if events:
            return events, next_seq
    return [], None


def job_eta(services: Services, spec: WorkflowSpec, sla_class: str, size: int) -> EtaSnapshot:
    """What the new job keeps of its workflow's history for its ETA (`longhaul.core.eta`): one cached read."""
    entries = services.recent_history.entries(spec.name)
    steps = [(s.name, s.kind in ITEM_KINDS) for s in spec.steps]
    return snapshot(steps, entries, sla_class=sla_class, size=size)


def history_sla_seconds(eta: EtaSnapshot, workflow_estimate: int) -> int:
    """The submission's `estimated_sla_seconds`: the whole job from its workflow's history, else the workflow's own
    estimate from its input."""
    total = eta.total_seconds()
    return workflow_estimate if total is None else max(1, math.ceil(total))


def step_usage(ledger: list[Charge]) -> list[StepUsage]:
    """The ledger summed per (step, item), in the order of the calls."""
    rows: dict[tuple[str, int | None], dict[str, Any]] = {}
    for charge in sorted(ledger, key=lambda c: c.at):
        if charge.step is None or charge.status == "released":
            continue
        row = rows.setdefault(
            (charge.step, charge.item),
            {
                "calls": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "read": 0,
                "written": 0,
                "cost": 0,
                "held": 0,
                "models": [],
            },
        )
        if charge.status == "settled":
            row["calls"] += 1
            row["input_tokens"] += charge.input_tokens
            row["output_tokens"] += charge.output_tokens
            row["read"] += charge.cache_read_tokens
            row["written"] += charge.cache_write_tokens
            row["cost"] += charge.cost_micro
        else:
            row["held"] += charge.reserved_tokens
        model = f"{charge.route}={charge.provider}:{charge.model_id}"
        if model not in row["models"]:
            row["models"].append(model)
    return [
        StepUsage(
            step=step,
            item=item,
            calls=row["calls"],
            input_tokens=row["input_tokens"],
            output_tokens=row["output_tokens"],
            cache_read_tokens=row["read"],
            cache_write_tokens=row["written"],
            cost_usd=usd(row["cost"]),
            held_tokens=row["held"],
            models=row["models"],
        )
        for (step, item), row in rows.items()
    ]


def readiness(services: Callable[[], Services], *, version: str) -> Health:
    """Ready when the configuration loads and the jobs table answers; says nothing about what is wrong."""
    checks: dict[str, Literal["ok", "failed"]] = {"configuration": "failed", "table": "failed"}
    try:
        jobs = services().jobs
        checks["configuration"] = "ok"
        jobs.get_job("job_health_probe")  # a read of an item that never exists
        checks["table"] = "ok"
    except Exception:
        logger.exception("not ready")
    ready = all(v == "ok" for v in checks.values())
    return Health(status="ok" if ready else "unavailable", version=version, checks=checks)


def page_of_jobs(
    services: Services,
    *,
    tenant_id: str | None,
    status: JobStatus | None,
    limit: int,
    cursor: str | None,
    narrow: JobFilter | None = None,
) -> JobList:
    try:
        jobs, next_cursor = services.jobs.page_jobs(
            tenant_id=tenant_id, status=status, limit=limit, cursor=cursor, narrow=narrow
        )
    except BadCursor:
        raise BadRequest("cursor must be a value returned as next_cursor by the same listing") from None
    return JobList(jobs=[j.view() for j in jobs], next_cursor=next_cursor)
