"""Recorded jobs: a finished job's request, every model call's request and response, each step's output (with the
JSON and Markdown artifacts it names, read in) and its result, kept in a folder, so that the job can run again against
new code with the recorded model answers (`tests/replay`, `make replay-tests`) and any change of a step's output is
named by its step and field. An intended change is accepted by recording again.

    make record                                               # the samples of every workflow → tests/replay/recordings
    python -m local.recording samples/request.json --name mine  # one request, into tests/replay/recordings/mine

A recording folder holds `request.json` (the body submitted), `model_calls.json` (the recorded answers, keyed by
prompt version and prompt hash: a `replay` route's fixtures), `steps.json` (each step's and item's output) and
`result.json`; a job that works on another job's result (dispute resolution: a completed reconciliation) also holds
`before.json`, the jobs run first, each named in the request (and in what the job produced) as `{before<n>}`. A job
that waits for a review gets it approved by its tenant's reviewer (`<tenant>-reviewer`), as recorded. The model
calls come from the job's own provenance: its budget ledger names each call's prompt and
response hash, and the gateway kept the raw response under it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import requests

REPO_ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = REPO_ROOT / "tests" / "replay" / "recordings"
SAMPLES = {  # recording name -> the request it submits (a sample of each workflow)
    "document-analysis-sample": REPO_ROOT / "samples" / "request.json",
    "invoice-reconciliation-sample": REPO_ROOT / "samples" / "invoice_request.json",
    "dispute-resolution-sample": REPO_ROOT / "samples" / "dispute_request.json",
}
# The jobs a sample needs first: their requests, named `{before<n>}` in its request.
SAMPLES_BEFORE = {"dispute-resolution-sample": [REPO_ROOT / "samples" / "invoice_request.json"]}
# Where a sample names the job it needs (`samples/dispute_request.json` holds a placeholder id).
SAMPLE_REFERENCES = {"dispute-resolution-sample": {"reconciliation_job_id": "{before0}"}}
JOB = "{job}"  # what a job's id becomes in a recording (every run has another)
# Ids derived from the job's (its effects' operation ids, its memories' and reviews' ids: `{op}`, `{mem}`, `{rev}`)
# and an e-mail's message id (`{message}`): another in each run.
RUN_IDS = re.compile(r"\b(?:(op|mem|rev)_[0-9a-f]{24}|[0-9a-z]{8,16}(?:-[0-9a-z]{4,12}){4,6})\b")
# Fields that differ between two runs of the same job whatever the code does: times and durations.
VOLATILE = frozenset({"at", "duration_ms", "generated_at", "created_at", "updated_at", "finished_at", "started_at"})
FILES = ("request.json", "model_calls.json", "steps.json", "result.json")


@dataclass(frozen=True)
class Snapshot:
    """What a finished job produced, normalized: each step's (and item's) output, and its result."""

    steps: dict[str, Any]
    result: Any


@dataclass(frozen=True)
class Difference:
    step: str  # `<step>` or `<step>#<item>`, or `result`
    field: str  # a path into its output, e.g. `draft_key.content.claims[0].text`
    recorded: Any
    now: Any

    def __str__(self) -> str:
        field = self.field or "(the whole output)"
        return f"step {self.step}, field {field}: recorded {_short(self.recorded)}, now {_short(self.now)}"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- reading a finished job -----------------------------------------------------------------------------------------


class JobReader:
    """A job's records and artifacts in the platform's table and bucket."""

    def __init__(self, table: Any, s3: Any, bucket: str, job_id: str, aliases: Mapping[str, str] | None = None) -> None:
        self.table, self.s3, self.bucket, self.job_id = table, s3, bucket, job_id
        self.aliases = dict(aliases or {})  # other jobs' ids (the jobs run before it) -> their names in a recording

    def items(self, prefix: str) -> list[dict[str, Any]]:
        from boto3.dynamodb.conditions import Key

        query = Key("pk").eq(f"JOB#{self.job_id}") & Key("sk").begins_with(prefix)
        found: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"KeyConditionExpression": query, "ConsistentRead": True}
        while True:
            page = self.table.query(**kwargs)
            found += page["Items"]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def read(self, key: str) -> bytes | None:
        try:
            body: bytes = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            return body
        except self.s3.exceptions.NoSuchKey:
            return None

    def normalize(self, value: Any, seen: frozenset[str] = frozenset()) -> Any:
        """`value` with the job's id replaced, volatile fields dropped, and every JSON or Markdown artifact of the job
        it names read in (`{"key": …, "content": …}`)."""
        if isinstance(value, Mapping):
            return {str(k): self.normalize(v, seen) for k, v in sorted(value.items()) if k not in VOLATILE}
        if isinstance(value, list | tuple):
            return [self.normalize(v, seen) for v in value]
        if isinstance(value, Decimal):  # DynamoDB numbers
            return int(value) if value == int(value) else float(value)
        if isinstance(value, str):
            named = value.replace(self.job_id, JOB)
            for job_id, alias in self.aliases.items():
                named = named.replace(job_id, alias)
            named = RUN_IDS.sub(lambda m: "{" + (m.group(1) or "message") + "}", named)  # another each run
            if self.job_id in value and value not in seen and value.endswith((".json", ".md")):
                body = self.read(value)
                if body is not None:
                    content = json.loads(body) if value.endswith(".json") else body.decode()
                    return {"key": named, "content": self.normalize(content, seen | {value})}
            return named
        return value

    def snapshot(self) -> Snapshot:
        steps: dict[str, Any] = {}
        for record in sorted(self.items("STEP#"), key=lambda r: str(r["sk"])):
            if record.get("status") != "succeeded":
                continue
            name = str(record["step"]) + ("" if record.get("item") is None else f"#{int(record['item'])}")
            steps[name] = self.normalize(record.get("output") or {})
        (job,) = self.items("JOB")
        result = self.read(str(job["result_key"])) if job.get("result_key") else None
        return Snapshot(steps=steps, result=self.normalize(json.loads(result)) if result else None)

    def model_calls(self) -> dict[str, Any]:
        """The job's model calls as a replay route's fixtures: `{"<prompt version>:<prompt hash>": {task, response}}`,
        from its ledger and the prompts and responses the gateway kept."""
        from longhaul.adapters.models.recording import apply_mask
        from longhaul.storage.artifacts import prompt_key, response_key

        fixtures: dict[str, Any] = {}
        for charge in self.items("CHARGE#"):
            if charge.get("status") != "settled" or not charge.get("response_hash"):
                continue
            prompt = json.loads(self.read(prompt_key(self.job_id, str(charge["prompt_hash"]))) or b"{}")
            kept = json.loads(self.read(response_key(self.job_id, str(charge["response_hash"]))) or b"{}")
            response = {
                "text": kept["text"],
                "usage": {
                    "input_tokens": kept["input_tokens"],
                    "output_tokens": kept["output_tokens"],
                    # what the provider read from / wrote to its prompt cache, when it reported it
                    **{k: kept[k] for k in ("cache_read_tokens", "cache_write_tokens") if kept.get(k) is not None},
                },
                "model_id": kept["model_id"],
                "stop_reason": kept["stop_reason"],
            }
            key, mask = f"{charge['prompt_version']}:{charge['prompt_hash']}", dict[str, str]()
            if prompt:  # a prompt that carries its run's ids is recorded under its masked key (another run asks it)
                key, mask = _masked_key(prompt, str(charge["prompt_version"])) or (key, mask)
            response["text"] = apply_mask(str(response["text"]), mask)
            fixtures[key] = {"task": prompt.get("task"), "response": response}
        return dict(sorted(fixtures.items()))


def _masked_key(prompt: Mapping[str, Any], prompt_version: str) -> tuple[str, dict[str, str]] | None:
    """A kept prompt's masked fixture key and mask, when it carries ids of its run (`adapters.models.recording`)."""
    from longhaul.adapters.models.recording import masked
    from longhaul.core.llm import ModelRequest

    request = ModelRequest(
        task=prompt["task"],
        prompt_version=prompt_version,
        system=prompt["system"],
        prompt=prompt["prompt"],
        context={},
        response_schema=prompt.get("response_schema"),
        max_tokens=prompt["max_tokens"],
        instructions=prompt.get("instructions"),
    )
    key, mask = masked(request)
    return (key, mask) if mask else None


def reader(platform: Any, job_id: str, aliases: Mapping[str, str] | None = None) -> JobReader:
    deployment = platform.deployment
    table = platform.client("dynamodb", resource=True).Table(deployment.table_name)
    return JobReader(table, platform.client("s3"), deployment.bucket_name, job_id, aliases)


# --- comparing -------------------------------------------------------------------------------------------------------


def differences(recorded: Snapshot, now: Snapshot, order: Sequence[str] = ()) -> list[Difference]:
    """Every field that differs, step by step in the workflow's `order` of steps (the first one listed is where a
    change begins; a step missing on either side is one difference), then the result."""
    found: list[Difference] = []
    position = {name: index for index, name in enumerate(order)}

    def ranked(name: str) -> tuple[int, int, str]:
        step, _, item = name.partition("#")
        return position.get(step, len(position)), int(item) if item.isdigit() else -1, name

    for step in sorted({*recorded.steps, *now.steps}, key=ranked):
        if step not in now.steps or step not in recorded.steps:
            found.append(Difference(step, "", recorded.steps.get(step), now.steps.get(step)))
            continue
        found += [Difference(step, path, a, b) for path, a, b in _walk(recorded.steps[step], now.steps[step], "")]
    found += [Difference("result", path, a, b) for path, a, b in _walk(recorded.result, now.result, "")]
    return found


def _walk(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            yield from _walk(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _walk(x, y, f"{path}[{index}]")
    elif a != b:
        yield path, a, b


# --- recordings on disk ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recording:
    name: str
    request: dict[str, Any]
    model_calls: dict[str, Any]
    expected: Snapshot
    before: tuple[dict[str, Any], ...] = ()

    def write(self, into: Path) -> Path:
        folder = into / self.name
        folder.mkdir(parents=True, exist_ok=True)
        contents = {
            "request.json": self.request,
            "model_calls.json": self.model_calls,
            "steps.json": self.expected.steps,
            "result.json": self.expected.result,
            **({"before.json": list(self.before)} if self.before else {}),
        }
        for name, value in contents.items():
            (folder / name).write_text(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return folder

    @classmethod
    def read(cls, folder: Path) -> Recording:
        loaded = {name: json.loads((folder / name).read_text()) for name in FILES}
        before = json.loads((folder / "before.json").read_text()) if (folder / "before.json").exists() else []
        return cls(
            name=folder.name,
            request=loaded["request.json"],
            model_calls=loaded["model_calls.json"],
            expected=Snapshot(steps=loaded["steps.json"], result=loaded["result.json"]),
            before=tuple(before),
        )

    def run(self, platform: Any) -> tuple[dict[str, Any], JobReader]:
        """Run the recorded job again (the jobs it needs first, then it): its final status, and its reader."""
        return run_recorded(platform, self.request, self.before)


def recordings(folder: Path = RECORDINGS) -> list[Recording]:
    return [Recording.read(f) for f in sorted(folder.iterdir()) if f.is_dir() and (f / "request.json").exists()]


def merged_fixtures(recorded: list[Recording], into: Path) -> Path:
    """One fixtures file with every recording's model calls (a replay route answers from it)."""
    merged: dict[str, Any] = {}
    for recording in recorded:
        merged.update(recording.model_calls)
    into.write_text(json.dumps(merged, indent=1, sort_keys=True, ensure_ascii=False))
    return into


# --- running a job ---------------------------------------------------------------------------------------------------


def run_job(
    platform: Any,
    request: Mapping[str, Any],
    *,
    tenant: str = "alpha",
    timeout: float = 300,
    reviewer: str | None = None,
) -> dict[str, Any]:
    """Submit `request` as `tenant` and wait until the job finishes; its final status. With `reviewer` (a key's
    name), a review the job waits for is approved."""
    headers = {**platform.auth_header(tenant), "Content-Type": "application/json"}
    accepted = requests.post(f"{platform.api_url}/v1/jobs", data=json.dumps(request), headers=headers, timeout=60)
    accepted.raise_for_status()
    job_id = accepted.json()["job_id"]
    deadline = time.monotonic() + timeout
    approved: set[str] = set()
    while time.monotonic() < deadline:
        job: dict[str, Any] = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=60).json()
        if job["status"] in ("completed", "failed", "cancelled", "expired"):
            return job
        review_id = (job.get("review") or {}).get("review_id")
        if reviewer and job["status"] == "waiting_for_review" and review_id and review_id not in approved:
            decided = requests.post(
                f"{platform.api_url}/v1/reviews/{review_id}/decision",
                data=json.dumps({"decision": "approve"}),
                headers={**platform.auth_header(reviewer), "Content-Type": "application/json"},
                timeout=60,
            )
            decided.raise_for_status()
            approved.add(review_id)
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} did not finish in {timeout:.0f} s")


def run_recorded(
    platform: Any, request: Mapping[str, Any], before: Sequence[Mapping[str, Any]] = (), *, tenant: str = "alpha"
) -> tuple[dict[str, Any], JobReader]:
    """Run the jobs of `before` (each must complete), then `request` with their ids in place of `{before<n>}`, its
    review (if it waits for one) approved by the tenant's reviewer; its final status, and its reader (which names
    the earlier jobs as `{before<n>}`)."""
    aliases: dict[str, str] = {}
    for n, earlier in enumerate(before):
        done = run_job(platform, earlier, tenant=tenant)
        if done["status"] != "completed":
            raise RuntimeError(f"the job run before it ended {done['status']}: {done.get('error')}")
        aliases[done["job_id"]] = f"{{before{n}}}"
    text = json.dumps(request)
    for job_id, alias in aliases.items():
        text = text.replace(json.dumps(alias), json.dumps(job_id))
    job = run_job(platform, json.loads(text), tenant=tenant, reviewer=f"{tenant}-reviewer")
    return job, reader(platform, job["job_id"], aliases)


def record(platform: Any, name: str, request: Mapping[str, Any], before: Sequence[Mapping[str, Any]] = ()) -> Recording:
    """Run `request` (after the jobs of `before`) on the platform and record the job, with the model calls of the
    jobs run before it (a replay runs them too)."""
    job, job_reader = run_recorded(platform, request, before)
    if job["status"] != "completed":
        raise RuntimeError(f"{name}: the job ended {job['status']}: {job.get('error')}; nothing recorded")
    calls: dict[str, Any] = {}
    for job_id in job_reader.aliases:
        calls.update(reader(platform, job_id).model_calls())
    calls.update(job_reader.model_calls())
    snapshot = job_reader.snapshot()
    return Recording(name, dict(request), dict(sorted(calls.items())), snapshot, tuple(dict(b) for b in before))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m local.recording", description=__doc__.split("\n")[0])
    parser.add_argument("request", nargs="?", type=Path, help="a request body (default: every workflow's sample)")
    parser.add_argument("--name", help="the recording's name (with a request)")
    parser.add_argument("--into", type=Path, default=RECORDINGS, help="the recordings folder")
    args = parser.parse_args(argv)
    if args.request and not args.name:
        parser.error("--name is needed with a request")
    chosen = {args.name: args.request} if args.request else SAMPLES
    from local.platform import LocalPlatform

    with LocalPlatform.start(REPO_ROOT) as platform:
        for name, path in chosen.items():
            request = json.loads(Path(path).read_text())
            request["input"].update(SAMPLE_REFERENCES.get(name, {}))
            before = [json.loads(p.read_text()) for p in SAMPLES_BEFORE.get(name, [])]
            folder = record(platform, name, request, before).write(args.into)
            print(f"recorded {name} in {folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
