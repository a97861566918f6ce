"""The batch lane: a fan-out step's model calls as one Bedrock batch inference job instead of one call per item.

For a job in the batch lane (`Job.batch_lane`: `model_lane` `batch`, or `auto` in the `batch` class), before a
fan-out whose spec says `calls_model=True` runs its items, `submit` (the step's own function, invoked with a task
token) decides the step's lane:

- on demand when the step does not qualify: no batch role configured, a route whose provider has no batch inference,
  fewer records than the model's minimum (`BatchPolicy.min_records`, Bedrock's quota), more than a job may hold,
  or a deadline that leaves less than `min_window_seconds`; the wait is resumed at once (event `model_batch_skipped`);
- else each item's first model call is built exactly as the item will build it (`ModelCalls.capturing`: the step's
  own domain function runs up to its first call, which is captured instead of made), reserved against the budget at
  the batch price under the very charge id the item will settle (the ledger's `lane` says `batch`), written as one
  JSONL record per item to the artifacts bucket, and submitted as one `CreateModelInvocationJob` (its client token
  derived from the job, step and attempt: a second delivery never submits twice). Event `model_batch_submitted`.

The execution waits on the task token with no compute held. Bedrock's state-change event on EventBridge (or the
scheduled check, the safety net, `check`) calls `finish`: the outputs Bedrock wrote (`<output>/<job id>/<input
file>.out`) are read once and kept per item; a record that failed, or that Bedrock never wrote, has its batch
reservation released; event `model_batch_finished` (once: the batch's record moves `submitted → finished`
conditionally); then the wait resumes. The check also stops (`StopModelInvocationJob`) a batch still running when the
job's deadline reserve is reached, and finishes it with whatever outputs there are.

Then the Map runs the items as ever. An item's first call finds its answer (`batch_answer`) and settles the
reservation at the batch price, through the same validation ladder as any call: an answer that fails validation
climbs the ladder on demand (feedback, stronger route). An item with no answer calls on demand. The ledger's charge
id is the item's own, so a crash or a second delivery anywhere (after submit, after completion, while reading
outputs) neither charges a call twice nor loses an item.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from pydantic import Field

from longhaul.core import schema
from longhaul.core.budgets import CallSize, price_of, price_table, worst_case_input_tokens
from longhaul.core.clock import iso
from longhaul.core.errors import BudgetExceededError, CancelledError, LonghaulError
from longhaul.core.llm import ModelRequest, Usage
from longhaul.core.model import Model
from longhaul.core.observability import logger
from longhaul.core.ports import BatchJobs
from longhaul.core.records import Job
from longhaul.storage import artifacts as keys
from longhaul.storage.budgets import CallLabels
from longhaul.storage.dynamo import plain

if TYPE_CHECKING:
    from longhaul.services import Services

# Providers whose routes can be batched: Bedrock, and the offline model (the local platform's in-memory Bedrock runs
# it over the records).
BATCH_PROVIDERS = frozenset({"bedrock", "offline"})
# Bedrock's terminal statuses of a batch inference job (`GetModelInvocationJob`, the EventBridge event's `status`).
TERMINAL = frozenset({"Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired"})
# The input file's name: Bedrock writes the outputs of `records.jsonl` to `<output>/<job id>/records.jsonl.out`.
RECORDS_FILE = "records.jsonl"
# The EventBridge event Bedrock sends when a batch inference job changes state.
EVENT_SOURCE = "aws.bedrock"
EVENT_DETAIL_TYPE = "Batch Inference Job State Change"


class BatchPolicy(NamedTuple):
    """Bedrock's batch quotas (settings, with the documented defaults) and the deadline's margins."""

    min_records: int = 100  # "Minimum number of records per batch inference job" (per model)
    max_records: int = 50_000  # "Records per input file per batch inference job"
    jobs_in_progress: int = 20  # "Sum of in-progress and submitted batch inference jobs using a base model"
    min_window_seconds: int = 3600  # a batch needs at least this long before the job's deadline
    reserve_seconds: int = 900  # a batch still running this long before the deadline is stopped


class Captured(Exception):
    """Raised by a capturing gateway at a step's first model call: the request, its route and its charge id."""

    def __init__(self, charge_id: str, route: str, request: ModelRequest, settled: bool) -> None:
        super().__init__(charge_id)
        self.charge_id, self.route, self.request, self.settled = charge_id, route, request, settled


class BatchRequest(Model):
    """One record of a batch: the item it answers, the charge the item will settle, the request's hash."""

    item: int
    record_id: str
    charge_id: str
    prompt_hash: str


class BatchAnswer(Model):
    """What Bedrock answered one record (kept per item), or why it did not."""

    record_id: str
    prompt_hash: str
    ok: bool
    text: str = ""
    usage: Usage = Field(default_factory=lambda: Usage(input_tokens=0, output_tokens=0))
    stop_reason: str = ""
    model_id: str = ""
    error: str | None = None


BatchStatus = Literal["submitted", "finished"]


class BatchRecord(Model):
    """A step's batch, kept with its job (`JOB#<id>/BATCH#<step>#<attempt>`) and, while it runs, under the open
    batches' partition the scheduled check reads."""

    job_id: str
    step: str
    attempt: int
    name: str
    token: str
    route: str
    model_id: str
    records: int
    status: BatchStatus = "submitted"
    batch_arn: str | None = None
    submitted_at: str


# ---------------------------------------------------------------------------------------------------------- naming


def batch_name(job_id: str, step: str, attempt: int) -> str:
    """The batch job's name: Bedrock's names allow letters, digits and hyphens (a step's name has underscores)."""
    digest = hashlib.sha256(f"{job_id}/{step}/{attempt}".encode()).hexdigest()[:32]
    return f"longhaul-{digest}"


def record_id(item: int) -> str:
    """A record's id: alphanumeric, as Bedrock asks, the item's number in it."""
    return f"ITEM{item:07d}"


def prefix(job_id: str, step: str, attempt: int) -> str:
    return keys.work_key(job_id, step, f"batch-{attempt}")


def answer_key(job_id: str, step: str, attempt: int, item: int) -> str:
    return f"{prefix(job_id, step, attempt)}/answers/{item:07d}.json"


def requests_key(job_id: str, step: str, attempt: int) -> str:
    return f"{prefix(job_id, step, attempt)}/requests.json"


def policy_of(services: "Services") -> BatchPolicy:
    s = services.settings
    return BatchPolicy(
        s.batch_min_records,
        s.batch_max_records,
        s.batch_jobs_in_progress,
        s.batch_min_window_seconds,
        s.batch_reserve_seconds,
    )


# ---------------------------------------------------------------------------------------------------------- lane


def on_demand_reason(
    job: Job,
    records: int,
    now: datetime,
    policy: BatchPolicy,
    *,
    provider: str,
    role_configured: bool,
    in_progress: int = 0,
) -> str | None:
    """Why the step calls on demand although the job asked for the batch lane; None: it is batched."""
    if not role_configured:
        return "no batch inference role is configured"
    if provider not in BATCH_PROVIDERS:
        return f"the route's provider ({provider}) has no batch inference"
    if records < policy.min_records:
        return f"{records} record(s), below the model's minimum of {policy.min_records} per batch"
    if records > policy.max_records:
        return f"{records} records, above the {policy.max_records} a batch may hold"
    if in_progress >= policy.jobs_in_progress:
        return f"{in_progress} batch jobs of the model are in progress, Bedrock's most ({policy.jobs_in_progress})"
    if job.deadline_at is not None:
        left = (job.deadline_at - now).total_seconds()
        if left < policy.min_window_seconds:
            return f"the deadline leaves {int(left)} s, less than the {policy.min_window_seconds} s a batch needs"
    return None


def model_input(request: ModelRequest, provider: str) -> dict[str, Any]:
    """A record's `modelInput`, in Converse's shape (the job is created with `modelInvocationType=Converse`). Batch
    inference takes no tool use in that shape, so a structured answer's schema is stated in the system prompt (the
    ladder validates the answer as ever). The offline model reads the request's own fields (`longhaulRequest`)."""
    system = request.system
    if request.response_schema is not None:
        schema = json.dumps(request.response_schema, separators=(",", ":"), sort_keys=True)
        system += f"\n\nAnswer with one JSON object only, matching this JSON schema: {schema}"
    body: dict[str, Any] = {
        "system": [{"text": system}],
        "messages": [{"role": "user", "content": [{"text": request.prompt}]}],
        "inferenceConfig": {"maxTokens": request.max_tokens, "temperature": 0},
    }
    if provider == "offline":
        body["longhaulRequest"] = request.model_dump(mode="json")
    return body


def parse_output_line(line: Mapping[str, Any], model_id: str) -> tuple[str, BatchAnswer | None, str | None]:
    """(record id, its answer or None, the error) of one line of Bedrock's output file (Converse's response shape in
    `modelOutput`, or an `error`)."""
    rid = str(line.get("recordId", ""))
    output = line.get("modelOutput")
    if not isinstance(output, Mapping) or "error" in line:
        return rid, None, json.dumps(line.get("error") or "no output")[:300]
    content = output.get("output", {}).get("message", {}).get("content", [])
    text = "".join(str(block.get("text", "")) for block in content if isinstance(block, Mapping))
    usage = output.get("usage", {})
    answer = BatchAnswer(
        record_id=rid,
        prompt_hash="",
        ok=True,
        text=text,
        usage=Usage(input_tokens=int(usage.get("inputTokens", 0)), output_tokens=int(usage.get("outputTokens", 0))),
        stop_reason=str(output.get("stopReason", "end_turn")),
        model_id=model_id,
    )
    return rid, answer, None


# ---------------------------------------------------------------------------------------------------------- store


class BatchStore:
    """The batches' records in the platform table."""

    OPEN_PARTITION = schema.OPEN_BATCHES_PARTITION

    def __init__(self, table: Any) -> None:
        self.table = table

    @staticmethod
    def key(job_id: str, step: str, attempt: int) -> dict[str, str]:
        return {schema.PK: schema.job_pk(job_id), schema.SK: f"{schema.BATCH_PREFIX}{step}#{attempt}"}

    def open_key(self, name: str) -> dict[str, str]:
        return {schema.PK: self.OPEN_PARTITION, schema.SK: name}

    def get(self, job_id: str, step: str, attempt: int) -> BatchRecord | None:
        item = self.table.get_item(Key=self.key(job_id, step, attempt), ConsistentRead=True).get("Item")
        return BatchRecord.model_validate(_plain(item)) if item else None

    def put(self, record: BatchRecord) -> None:
        """Write the record and its open marker (a second delivery's write replaces the token only)."""
        self.table.put_item(Item={**self.key(record.job_id, record.step, record.attempt), **record.model_dump()})
        self.table.put_item(
            Item={
                **self.open_key(record.name),
                "job_id": record.job_id,
                "step": record.step,
                "attempt": record.attempt,
                "model_id": record.model_id,
            }
        )

    def set_token(self, record: BatchRecord, token: str) -> None:
        """The wait's token now (a retried Task's), leaving the rest as it is."""
        self._set(record, "token", token)

    def set_arn(self, record: BatchRecord, arn: str) -> None:
        self._set(record, "batch_arn", arn)

    def _set(self, record: BatchRecord, name: str, value: str) -> None:
        self.table.update_item(
            Key=self.key(record.job_id, record.step, record.attempt),
            UpdateExpression="SET #n = :v",
            ExpressionAttributeNames={"#n": name},
            ExpressionAttributeValues={":v": value},
        )

    def finish(self, record: BatchRecord) -> bool:
        """Move it to `finished`, once (False: another delivery did)."""
        try:
            self.table.update_item(
                Key=self.key(record.job_id, record.step, record.attempt),
                UpdateExpression="SET #s = :f",
                ConditionExpression="#s = :sub",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues={":f": "finished", ":sub": "submitted"},
            )
        except self.table.meta.client.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def close(self, name: str) -> None:
        self.table.delete_item(Key=self.open_key(name))

    def in_progress(self, model_id: str) -> int:
        """The batches of `model_id` not yet resumed."""
        return sum(1 for *_, model in self._open() if model == model_id)

    def open_batches(self) -> list[tuple[str, str, str, int]]:
        """(name, job id, step, attempt) of every batch not yet resumed."""
        return [(name, job_id, step, attempt) for name, job_id, step, attempt, _ in self._open()]

    def _open(self) -> list[tuple[str, str, str, int, str]]:
        found: list[tuple[str, str, str, int, str]] = []
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": f"{schema.PK} = :p",
            "ExpressionAttributeValues": {":p": self.OPEN_PARTITION},
        }
        while True:
            page = self.table.query(**kwargs)
            found += [
                (i[schema.SK], i["job_id"], i["step"], int(i["attempt"]), str(i.get("model_id", "")))
                for i in page.get("Items", [])
            ]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def find(self, name: str) -> BatchRecord | None:
        item = self.table.get_item(Key=self.open_key(name), ConsistentRead=True).get("Item")
        return self.get(item["job_id"], item["step"], int(item["attempt"])) if item else None


def _plain(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in plain(item).items() if k not in (schema.PK, schema.SK)}


# ---------------------------------------------------------------------------------------------------------- submit


class Submitted(NamedTuple):
    """What `submit` decided: the lane, the records and why (an on-demand step's reason)."""

    lane: Literal["batch", "on_demand"]
    records: int
    reason: str | None = None
    name: str | None = None


def submit(
    services: "Services",
    jobs: BatchJobs | None,
    job: Job,
    step: str,
    token: str,
    captured: Iterable[tuple[int, Captured]],
    *,
    role_arn: str | None,
) -> Submitted:
    """Decide the step's lane and, for the batch lane, reserve, write and submit its records; the wait is resumed at
    once when the step calls on demand (or its batch finished already: a late second delivery)."""
    attempt, store = job.attempts, BatchStore(services.jobs.table)
    name = batch_name(job.job_id, step, attempt)
    known = store.get(job.job_id, step, attempt)
    if known is not None:  # a second delivery (a retried Task, a new token): the wait listens on its token now
        store.set_token(known, token)
        if known.batch_arn is None and role_arn is not None and jobs is not None:
            # the first delivery died between its record and its submission: submit now (the same client token)
            arn = _create(services, jobs, known, role_arn)
            _submitted_event(services, known, arn)
        current = store.get(job.job_id, step, attempt)
        if current is not None and current.status == "finished":  # it finished meanwhile: resume this wait
            _resume(services, store, current)
        return Submitted("batch", known.records, name=name)
    pending = [(item, c) for item, c in captured if not c.settled]
    route_name = services.routing.route_for(step, job.route)
    route = services.routing[route_name]
    reason = on_demand_reason(
        job,
        len(pending),
        services.now(),
        policy_of(services),
        provider=route.provider,
        role_configured=bool(role_arn) and jobs is not None,
        in_progress=store.in_progress(route.model_id),
    )
    if reason is None and any(c.route != route_name for _, c in pending):
        reason = "its items call different routes"
    if reason is not None:
        services.jobs.append_event(job.job_id, "model_batch_skipped", step=step, detail={"reason": reason})
        _tokens(services).succeed(token, {"lane": "on_demand"})
        return Submitted("on_demand", len(pending), reason)
    price = price_of(route.model_id, price_table(services.settings.model_prices)).in_lane("batch")
    policy = services.budgets.policy(job.tenant_id)
    job = services.budgets.with_limits(job, policy)
    requests: list[BatchRequest] = []
    lines: list[str] = []
    for item, c in pending:
        size = CallSize(
            input_tokens=worst_case_input_tokens(c.request.system, c.request.prompt, schema=c.request.response_schema),
            max_output_tokens=c.request.max_tokens,
            price=price,
        )
        labels = CallLabels(
            step, item, route_name, route.provider, route.model_id, c.request.prompt_version, c.request.prompt_hash(),
            code_version=services.settings.code_version, lane="batch",
        )  # fmt: skip
        try:
            services.budgets.reserve(job, c.charge_id, size, policy, labels)
        except BudgetExceededError:
            break  # the rest is called on demand, where the budget refuses it as ever
        except LonghaulError as error:
            if services.budgets.ledger_item(job.job_id, c.charge_id) is None:
                raise
            logger.info("a batch record's charge is held already", extra={"charge": c.charge_id, "error": str(error)})
        rid = record_id(item)
        requests.append(
            BatchRequest(item=item, record_id=rid, charge_id=c.charge_id, prompt_hash=c.request.prompt_hash())
        )
        lines.append(json.dumps({"recordId": rid, "modelInput": model_input(c.request, route.provider)}))
    base = prefix(job.job_id, step, attempt)
    services.artifacts.put_json(requests_key(job.job_id, step, attempt), [r.model_dump() for r in requests])
    services.artifacts.put_bytes(
        f"{base}/input/{RECORDS_FILE}", ("\n".join(lines) + "\n").encode(), "application/jsonl"
    )
    record = BatchRecord(
        job_id=job.job_id,
        step=step,
        attempt=attempt,
        name=name,
        token=token,
        route=route_name,
        model_id=route.model_id,
        records=len(requests),
        submitted_at=iso(services.now()),
    )
    store.put(record)  # before the submission: a retried Task submits it; the check ends one never submitted
    assert role_arn is not None and jobs is not None
    arn = _create(services, jobs, record, role_arn)
    _submitted_event(services, record, arn)
    return Submitted("batch", len(requests), name=name)


def _create(services: "Services", jobs: BatchJobs, record: BatchRecord, role_arn: str) -> str:
    """Submit the batch (idempotent: its client token is its name) and keep its ARN on its record."""
    bucket, base = services.settings.bucket_name, prefix(record.job_id, record.step, record.attempt)
    arn = jobs.submit(
        name=record.name,
        model_id=record.model_id,
        role_arn=role_arn,
        input_uri=f"s3://{bucket}/{base}/input/",
        output_uri=f"s3://{bucket}/{base}/output/",
        client_token=record.name,
    )
    BatchStore(services.jobs.table).set_arn(record, arn)
    return arn


def _submitted_event(services: "Services", record: BatchRecord, arn: str) -> None:
    detail = {"step": record.step, "records": record.records, "batch_id": arn}
    services.jobs.append_event(record.job_id, "model_batch_submitted", step=record.step, detail=detail)


# ---------------------------------------------------------------------------------------------------------- finish


def finish(services: "Services", record: BatchRecord) -> dict[str, int]:
    """Read the batch's outputs once, keep each item's answer, release the reservations of records without one,
    record `model_batch_finished` (once) and resume the wait. Safe to run again at any point."""
    store = BatchStore(services.jobs.table)
    requests = [
        BatchRequest.model_validate(r)
        for r in services.artifacts.get_json(requests_key(record.job_id, record.step, record.attempt))
    ]
    answers = _read_outputs(services, record)
    succeeded = failed = 0
    for request in requests:
        answer = answers.get(request.record_id)
        if answer is not None:
            answer = answer.model_copy(update={"prompt_hash": request.prompt_hash})
            key = answer_key(record.job_id, record.step, record.attempt, request.item)
            services.artifacts.put_json(key, answer)
            succeeded += 1
        else:  # no answer: the item calls on demand, under a reservation of its own
            services.budgets.release(record.job_id, request.charge_id)
            failed += 1
    summary = {"records": len(requests), "succeeded": succeeded, "failed": failed, "on_demand_after": failed}
    if store.finish(record):
        services.jobs.append_event(
            record.job_id, "model_batch_finished", step=record.step, detail={"step": record.step, **summary}
        )
    _resume(services, store, record)
    return summary


def _read_outputs(services: "Services", record: BatchRecord) -> dict[str, BatchAnswer]:
    """The answers Bedrock wrote, by record id (none when it wrote nothing: a failed or stopped job)."""
    if record.batch_arn is None:
        return {}
    job_part = record.batch_arn.rsplit("/", 1)[-1]
    key = f"{prefix(record.job_id, record.step, record.attempt)}/output/{job_part}/{RECORDS_FILE}.out"
    try:
        raw = services.artifacts.get_bytes(key)
    except Exception as error:
        logger.info("no batch output", extra={"key": key, "error": str(error)[:200]})
        return {}
    answers: dict[str, BatchAnswer] = {}
    for text in raw.decode().splitlines():
        if not text.strip():
            continue
        rid, answer, failure = parse_output_line(json.loads(text), record.model_id)
        if answer is not None:
            answers[rid] = answer
        else:
            logger.info("a batch record failed", extra={"record_id": rid, "error": failure})
    return answers


def _resume(services: "Services", store: BatchStore, record: BatchRecord) -> None:
    """Resume the wait on its latest token (read after the batch finished: a retried Task's replaced the first)."""
    current = store.get(record.job_id, record.step, record.attempt) or record
    _tokens(services).succeed(current.token, {"lane": "batch"})
    store.close(record.name)


def _tokens(services: "Services") -> Any:
    if services.tokens is None:
        raise RuntimeError("no task tokens port: the batch lane resumes its wait through Step Functions")
    return services.tokens


def on_state_change(services: "Services", jobs: BatchJobs, detail: Mapping[str, Any]) -> dict[str, int] | None:
    """Bedrock's `Batch Inference Job State Change` event: finish the batch it names when it ended."""
    store = BatchStore(services.jobs.table)
    name = str(detail.get("batchJobName", ""))
    record = store.find(name) if name else None
    if record is None or str(detail.get("status")) not in TERMINAL:
        return None
    if record.batch_arn is None and detail.get("batchJobArn"):
        record = record.model_copy(update={"batch_arn": str(detail["batchJobArn"])})
    return finish(services, record)


def check(services: "Services", jobs: BatchJobs) -> int:
    """The scheduled safety net: finish every open batch that ended (its event lost), or whose job's deadline reserve
    is reached (stopped first), or whose job left running (stopped). Returns how many it finished."""
    store, policy, done = BatchStore(services.jobs.table), policy_of(services), 0
    for name, job_id, step, attempt in store.open_batches():
        record = store.get(job_id, step, attempt)
        if record is None:
            store.close(name)
            continue
        if record.status == "finished":  # finished, not resumed (a crash between): resume
            _resume(services, store, record)
            continue
        job = services.jobs.get_job(job_id)
        ended = record.batch_arn is not None and jobs.status(record.batch_arn) in TERMINAL
        late = job is None or job.finished or _reserve_reached(job, services.now(), policy)
        if not ended and not late:  # (one not submitted yet: its retried Task submits it)
            continue
        if late and record.batch_arn is not None and not ended:
            jobs.stop(record.batch_arn)
        try:
            finish(services, record)
        except CancelledError:
            store.close(name)
        done += 1
    return done


def _reserve_reached(job: Job, now: datetime, policy: BatchPolicy) -> bool:
    if job.deadline_at is None:
        return False
    return now >= job.deadline_at - timedelta(seconds=policy.reserve_seconds)


def batch_answer(services: "Services", job_id: str, step: str, attempt: int, item: int) -> BatchAnswer | None:
    """The batch's answer to an item's first call, if the batch answered it."""
    try:
        return BatchAnswer.model_validate(services.artifacts.get_json(answer_key(job_id, step, attempt, item)))
    except Exception:
        return None
