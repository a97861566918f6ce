"""Recorded jobs: a finished job's request, every model call's request and response, each step's output (with the
JSON and Markdown artifacts it names, read in) and its result, kept in a folder, so that the job can run again against
new code with the recorded model answers (`tests/replay`, `make replay-tests`) and any change of a step's output is
named by its step and field. An intended change is accepted by recording again.

    make record                                               # the samples of every workflow → tests/replay/recordings
    python -m local.recording samples/request.json --name mine  # one request, into tests/replay/recordings/mine

A recording folder holds `request.json` (the body submitted), `model_calls.json` (the recorded answers, keyed by
prompt version and prompt hash: a `replay` route's fixtures), `steps.json` (each step's and item's output) and
`result.json`. The model calls come from the job's own provenance: its budget ledger names each call's prompt and
response hash, and the gateway kept the raw response under it.
"""

from __future__ import annotations

import argparse
import json
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
}
JOB = "{job}"  # what a job's id becomes in a recording (every run has another)
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

    def __init__(self, table: Any, s3: Any, bucket: str, job_id: str) -> None:
        self.table, self.s3, self.bucket, self.job_id = table, s3, bucket, job_id

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
            fixtures[f"{charge['prompt_version']}:{charge['prompt_hash']}"] = {
                "task": prompt.get("task"),
                "response": response,
            }
        return dict(sorted(fixtures.items()))


def reader(platform: Any, job_id: str) -> JobReader:
    deployment = platform.deployment
    table = platform.client("dynamodb", resource=True).Table(deployment.table_name)
    return JobReader(table, platform.client("s3"), deployment.bucket_name, job_id)


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

    def write(self, into: Path) -> Path:
        folder = into / self.name
        folder.mkdir(parents=True, exist_ok=True)
        contents = {
            "request.json": self.request,
            "model_calls.json": self.model_calls,
            "steps.json": self.expected.steps,
            "result.json": self.expected.result,
        }
        for name, value in contents.items():
            (folder / name).write_text(json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        return folder

    @classmethod
    def read(cls, folder: Path) -> Recording:
        loaded = {name: json.loads((folder / name).read_text()) for name in FILES}
        return cls(
            name=folder.name,
            request=loaded["request.json"],
            model_calls=loaded["model_calls.json"],
            expected=Snapshot(steps=loaded["steps.json"], result=loaded["result.json"]),
        )


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
    platform: Any, request: Mapping[str, Any], *, tenant: str = "alpha", timeout: float = 300
) -> dict[str, Any]:
    """Submit `request` as `tenant` and wait until the job finishes; its final status."""
    headers = {**platform.auth_header(tenant), "Content-Type": "application/json"}
    accepted = requests.post(f"{platform.api_url}/v1/jobs", data=json.dumps(request), headers=headers, timeout=60)
    accepted.raise_for_status()
    job_id = accepted.json()["job_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = requests.get(f"{platform.api_url}/v1/jobs/{job_id}", headers=headers, timeout=60).json()
        if job["status"] in ("completed", "failed", "cancelled", "expired"):
            return job
        time.sleep(0.2)
    raise TimeoutError(f"job {job_id} did not finish in {timeout:.0f} s")


def record(platform: Any, name: str, request: Mapping[str, Any]) -> Recording:
    """Run `request` on the platform and record the job."""
    job = run_job(platform, request)
    if job["status"] != "completed":
        raise RuntimeError(f"{name}: the job ended {job['status']}: {job.get('error')}; nothing recorded")
    job_reader = reader(platform, job["job_id"])
    return Recording(name, dict(request), job_reader.model_calls(), job_reader.snapshot())


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
            folder = record(platform, name, json.loads(Path(path).read_text())).write(args.into)
            print(f"recorded {name} in {folder.relative_to(REPO_ROOT) if folder.is_relative_to(REPO_ROOT) else folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
