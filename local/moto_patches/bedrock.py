"""Bedrock: batch inference jobs that run, in the in-memory AWS.

moto 5.2.5's Bedrock has model customization jobs, not model invocation (batch inference) jobs: the batch lane's
`CreateModelInvocationJob` would fail. The patch adds `CreateModelInvocationJob`, `GetModelInvocationJob` and
`StopModelInvocationJob` to moto's Bedrock responses, as the API documents them (idempotent by
`clientRequestToken`; statuses `Submitted` → `InProgress` → `Completed`, or `Stopped`). A job runs in a thread after
a delay (`RUN_AFTER_SECONDS` x the local time scale): it reads the `.jsonl` files under its input prefix from moto's
S3, answers each record with the offline model (the record's `modelInput.longhaulRequest`, which the batch lane adds
for offline routes; Converse's response shape in `modelOutput`), writes the outputs where Bedrock writes them
(`<output s3Uri>/<job id>/<input file name>.out`, each line `recordId`, `modelInput`, `modelOutput` or `error`, and
`manifest.json.out`), and sends Bedrock's `Batch Inference Job State Change` event through the local platform's
delivery (`DELIVERY`: moto's EventBridge does not invoke Lambda targets; the platform sets it at start).
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from local.moto_patches.core import _define, _module, _restore

LOG = logging.getLogger(__name__)
#: How long a local batch waits before it runs (seconds, times the local time scale).
RUN_AFTER_SECONDS = 2.0
#: The platform's delivery of an EventBridge event to the rules' Lambda targets (`local.schedules.deliver`).
DELIVERY: list[Callable[[dict[str, Any]], None]] = []
ACTIONS = ("create_model_invocation_job", "get_model_invocation_job", "stop_model_invocation_job")


@dataclass
class InvocationJob:
    arn: str
    name: str
    model_id: str
    role_arn: str
    input_uri: str
    output_uri: str
    account: str
    region: str
    token: str | None
    status: str = "Submitted"
    message: str = ""
    submitted: datetime = field(default_factory=lambda: datetime.now(UTC))
    stop: threading.Event = field(default_factory=threading.Event)

    def describe(self) -> dict[str, Any]:
        return {
            "jobArn": self.arn,
            "jobName": self.name,
            "modelId": self.model_id,
            "roleArn": self.role_arn,
            "status": self.status,
            "message": self.message,
            "submitTime": self.submitted.isoformat(),
            "lastModifiedTime": datetime.now(UTC).isoformat(),
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": self.input_uri, "s3InputFormat": "JSONL"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": self.output_uri}},
        }


_JOBS: dict[str, InvocationJob] = {}
_LOCK = threading.Lock()


def _identifier(path: str) -> str:
    """The job an API path names (`/model-invocation-job/<id or ARN>[/stop]`): its ARN."""
    parts = path.split("/model-invocation-job/", 1)[1].split("/stop")[0]
    found = unquote(parts)
    return next((arn for arn in _JOBS if arn == found or arn.endswith(f"/{found}")), found)


def _create(self: Any) -> str:
    params = json.loads(self.body)
    token = params.get("clientRequestToken")
    with _LOCK:
        same = next((j for j in _JOBS.values() if token and j.token == token), None)
        if same is not None:
            return json.dumps({"jobArn": same.arn})
        job_id = uuid.uuid4().hex[:12]
        job = InvocationJob(
            arn=f"arn:aws:bedrock:{self.region}:{self.current_account}:model-invocation-job/{job_id}",
            name=params["jobName"],
            model_id=params["modelId"],
            role_arn=params["roleArn"],
            input_uri=params["inputDataConfig"]["s3InputDataConfig"]["s3Uri"],
            output_uri=params["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"],
            account=self.current_account,
            region=self.region,
            token=token,
        )
        _JOBS[job.arn] = job
    threading.Thread(target=_run, args=(job,), name=f"longhaul-batch-{job_id}", daemon=True).start()
    return json.dumps({"jobArn": job.arn})


def _get(self: Any) -> str:
    job = _JOBS.get(_identifier(self.path))
    if job is None:
        from moto.core.exceptions import JsonRESTError

        raise JsonRESTError("ResourceNotFoundException", "no such model invocation job")
    return json.dumps(job.describe())


def _stop(self: Any) -> str:
    job = _JOBS.get(_identifier(self.path))
    if job is not None and job.status in ("Submitted", "InProgress", "Scheduled"):
        job.status = "Stopping"
        job.stop.set()
    return "{}"


def _s3(account: str) -> Any:
    from moto.s3.models import s3_backends

    return s3_backends[account]["global"]


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _answer(line: dict[str, Any], model_id: str) -> dict[str, Any]:
    """One output line: the offline model's answer to the record, in Converse's response shape."""
    from longhaul.adapters.models.offline import OfflineExtractiveModel
    from longhaul.core.llm import ModelRequest

    body = line.get("modelInput") or {}
    try:
        request = ModelRequest.model_validate(body["longhaulRequest"])
        response = OfflineExtractiveModel(model_id).generate(request)
    except Exception as error:
        return {**line, "error": {"errorCode": 400, "errorMessage": str(error)[:300]}}
    output = {
        "output": {"message": {"role": "assistant", "content": [{"text": response.text}]}},
        "stopReason": response.stop_reason,
        "usage": {
            "inputTokens": response.usage.input_tokens,
            "outputTokens": response.usage.output_tokens,
            "totalTokens": response.usage.input_tokens + response.usage.output_tokens,
        },
    }
    return {**line, "modelOutput": output}


def _run(job: InvocationJob) -> None:
    from local import lambda_runtime

    if lambda_runtime.scaled_wait(RUN_AFTER_SECONDS, event=job.stop):
        job.status = "Stopped"
        _deliver(job)
        return
    job.status = "InProgress"
    try:
        s3 = _s3(job.account)
        bucket, prefix = _split(job.input_uri)
        out_bucket, out_prefix = _split(job.output_uri)
        job_id = job.arn.rsplit("/", 1)[-1]
        stored = s3.get_bucket(bucket).keys
        files = sorted(k for k in stored if k.startswith(prefix) and k.endswith(".jsonl"))
        total = errors = 0
        for key in files:
            lines = [json.loads(t) for t in s3.get_object(bucket, key).value.decode().splitlines() if t.strip()]
            answered = [_answer(line, job.model_id) for line in lines]
            total += len(answered)
            errors += sum(1 for a in answered if "error" in a)
            name = key.rsplit("/", 1)[-1]
            body = "\n".join(json.dumps(a) for a in answered) + "\n"
            s3.put_object(out_bucket, f"{out_prefix.rstrip('/')}/{job_id}/{name}.out", body.encode())
        manifest = {"totalRecordCount": total, "processedRecordCount": total, "errorRecordCount": errors}
        s3.put_object(out_bucket, f"{out_prefix.rstrip('/')}/{job_id}/manifest.json.out", json.dumps(manifest).encode())
        job.status = "Stopped" if job.stop.is_set() else "Completed"
    except Exception as error:
        LOG.exception("local batch inference job %s failed", job.name)
        job.status, job.message = "Failed", str(error)[:300]
    _deliver(job)


def state_change_event(job: InvocationJob) -> dict[str, Any]:
    """Bedrock's EventBridge event for a batch inference job's new status."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Batch Inference Job State Change",
        "source": "aws.bedrock",
        "account": job.account,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": job.region,
        "resources": [job.arn],
        "detail": {
            "accountId": job.account,
            "batchJobName": job.name,
            "batchJobArn": job.arn,
            "batchModelId": job.model_id,
            "status": job.status,
            "failureMessage": job.message,
        },
    }


def _deliver(job: InvocationJob) -> None:
    for deliver in list(DELIVERY):
        try:
            deliver(state_change_event(job))
        except Exception:
            LOG.exception("the state change of %s was not delivered", job.name)


def _responses() -> Any:
    return _module("moto.bedrock.responses").BedrockResponse


def run_batch_inference_jobs() -> None:
    """Add the three batch inference actions to moto's Bedrock."""
    cls = _responses()
    for name, action in zip(ACTIONS, (_create, _get, _stop), strict=True):
        _define(cls, name, action)


def refuse_batch_inference_jobs() -> None:
    cls = _responses()
    for name in ACTIONS:
        _restore(cls, name)
