"""Routes compared: every eval case on each route (K times each), and per route what a platform team weighs when it
chooses a model — success, latency per call and per job (p50, p95), timeouts and errors, first-try schema adherence,
repair and escalation rates, tokens and dollars per completed job, and output variance under retry (the share of
cases whose result differs across the K runs).

    make eval EVAL_ARGS="--compare default,loose"             # the offline model against its loose sibling
    make eval EVAL_ARGS="--compare default,loose --repeat 3"  # each case three times per route: variance under retry

Read from the platform as an operator reads it: each job's view (status, usage, cost), its event log (the validation
ladder's rungs: `model_called`, `output_repaired`, `output_validation_failed`, `escalated_to_stronger_route`), its trace
(each model call's `chat <model>` span) and its result. Printed as a table (a column per route) and written as JSON
(`evals/results/<set>-compare.json`); nothing is gated.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import requests

from evals.run import SCORERS, TENANT, Api, CaseScore, Dataset

# Fields of a result that differ between two runs of the same case whatever the model answers.
# The job's accounting (`budget`, `usage`, `cost`: tokens split by cache and item order vary) is not its answer. (A
# dispute's notices cite what the tenant's memory held: each run starts with none of its vendors, `forget`.)
VOLATILE = frozenset({"budget", "usage", "cost", "at", "provenance"})  # and every id, time and link (`_volatile`)
# Ladder events after a first-try (`validate` rung) answer that say it was not right as answered.
NOT_FIRST_TRY = frozenset({"output_repaired", "output_validation_failed"})


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q`-th percentile (0 < q <= 100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)], 4)


@dataclass
class RunRecord:
    """One job of one case on one route: what the comparison reads of it."""

    case: str
    workflow: str
    status: str
    success: bool
    error_kind: str | None = None
    job_seconds: float | None = None
    call_seconds: list[float] = field(default_factory=list)
    first_tries: int = 0  # answers of the ladder's first rung
    first_try_valid: int = 0  # ... valid as answered (no repair, no validation failure)
    repaired: int = 0
    escalated: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    result_hash: str | None = None
    job_id: str = ""


def _volatile(key: str) -> bool:
    """A field that differs between two runs whatever the answer: ids and times, a link (signed, expiring)."""
    return key in VOLATILE or key.endswith(("_at", "url", "_id"))


def _normalized(value: Any, job_id: str) -> Any:
    if isinstance(value, Mapping):
        return {k: _normalized(v, job_id) for k, v in sorted(value.items()) if not _volatile(k)}
    if isinstance(value, list):
        return [_normalized(v, job_id) for v in value]
    if isinstance(value, str):  # any job's, effect's or memory's id in a text (a notice names its reconciliation)
        from longhaul.adapters.models.recording import RUN_IDS

        return RUN_IDS.sub("{id}", value.replace(job_id, "{job}"))
    return value


def result_hash(result: Any, job_id: str) -> str:
    """A result's fingerprint, times and the job's own id aside (two runs with the same answer hash alike)."""
    text = json.dumps(_normalized(result, job_id), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def ladder_counts(events: Sequence[Mapping[str, Any]]) -> tuple[int, int, int, int]:
    """(first-try answers, first-try answers valid as answered, repairs, escalations) of a job's event log: a
    `model_called` event of rung `validate` is a first try, spoiled when the next ladder event of its step and item
    is a repair or a validation failure."""
    tries = valid = repaired = escalated = 0
    pending: dict[tuple[Any, Any], bool] = {}  # (step, item) -> its first try is still unjudged
    for event in events:
        kind, where, detail = event["type"], (event.get("step"), event.get("item")), event.get("detail") or {}
        if kind == "model_called":
            if pending.pop(where, False):
                valid += 1  # the previous first try of this step and item was kept as answered
            if detail.get("rung") == "validate":
                tries += 1
                pending[where] = True
        elif kind in NOT_FIRST_TRY:
            pending.pop(where, None)
            repaired += kind == "output_repaired"
        elif kind == "escalated_to_stronger_route":
            escalated += 1
    return tries, valid + sum(pending.values()), repaired, escalated


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def read_run(api: Api, workflow: str, score: CaseScore) -> RunRecord:
    """What the comparison needs of a scored job, read through the API."""
    get = api._json  # the tenant's view
    job = get("GET", f"/v1/jobs/{score.job_id}")
    record = RunRecord(score.case, workflow, score.status, score.success, tokens=score.tokens, cost_usd=score.cost_usd)
    record.job_id = score.job_id
    record.error_kind = (job.get("error") or {}).get("kind")
    if job.get("finished_at"):
        record.job_seconds = _seconds(job["created_at"], job["finished_at"])
    events: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = get("GET", f"/v1/jobs/{score.job_id}/events" + (f"?cursor={cursor}" if cursor else ""))
        events += page["events"]
        cursor = page.get("next_cursor")
        if not cursor:
            break
    record.first_tries, record.first_try_valid, record.repaired, record.escalated = ladder_counts(events)
    trace = requests.get(f"{api.base}/v1/jobs/{score.job_id}/trace", headers=api.tenant, timeout=60)
    if trace.ok:
        spans = trace.json()["spans"]
        record.call_seconds = [_seconds(s["start"], s["end"]) for s in spans if s["name"].startswith("chat ")]
    if score.status == "completed":
        record.result_hash = result_hash(api.result(score.job_id), score.job_id)
    return record


def summarize_route(runs: Sequence[RunRecord]) -> dict[str, float | int | None]:
    """A route's figures over its runs."""
    jobs = len(runs)
    completed = [r for r in runs if r.status == "completed"]
    failed = [r for r in runs if r.status in ("failed", "expired")]
    timeouts = [r for r in runs if r.status == "expired" or r.error_kind == "timeout"]
    tries = sum(r.first_tries for r in runs)
    by_case: dict[tuple[str, str], list[str | None]] = {}
    for run in runs:
        by_case.setdefault((run.workflow, run.case), []).append(run.result_hash if run.status == "completed" else None)
    repeated = [set(hashes) for hashes in by_case.values() if len(hashes) > 1]
    calls = [s for r in runs for s in r.call_seconds]
    job_times = [r.job_seconds for r in runs if r.job_seconds is not None]

    def ratio(part: float, whole: float) -> float | None:
        return round(part / whole, 4) if whole else None

    return {
        "jobs": jobs,
        "cases": len(by_case),
        "success_rate": ratio(sum(r.success for r in runs), jobs),
        "call_p50_seconds": percentile(calls, 50),
        "call_p95_seconds": percentile(calls, 95),
        "job_p50_seconds": percentile(job_times, 50),
        "job_p95_seconds": percentile(job_times, 95),
        "timeout_rate": ratio(len(timeouts), jobs),
        "error_rate": ratio(len(failed), jobs),
        "first_try_schema_adherence": ratio(sum(r.first_try_valid for r in runs), tries),
        "repair_rate": ratio(sum(r.repaired for r in runs), tries),
        "escalation_rate": ratio(sum(r.escalated for r in runs), tries),
        "tokens_per_completed_job": round(sum(r.tokens for r in runs) / len(completed), 1) if completed else None,
        "usd_per_completed_job": round(sum(r.cost_usd for r in runs) / len(completed), 6) if completed else None,
        "output_variance_under_retry": ratio(sum(len(h) > 1 for h in repeated), len(repeated)),
    }


LABELS = {
    "jobs": "jobs",
    "success_rate": "success rate",
    "call_p50_seconds": "per call p50 (s)",
    "call_p95_seconds": "per call p95 (s)",
    "job_p50_seconds": "per job p50 (s)",
    "job_p95_seconds": "per job p95 (s)",
    "timeout_rate": "timeout rate",
    "error_rate": "error rate",
    "first_try_schema_adherence": "first-try schema adherence",
    "repair_rate": "repair rate",
    "escalation_rate": "escalation rate",
    "tokens_per_completed_job": "tokens / completed job",
    "usd_per_completed_job": "USD / completed job",
    "output_variance_under_retry": "output variance under retry",
}


def forget(api: Api, vendors: Sequence[str]) -> None:
    """Delete what the tenant's memory holds of these vendors (the dataset's own), so that a dispute run again reads
    the same memory as the first run did: its result differs only if its model answers differently."""
    for vendor in vendors:
        for _ in range(50):  # a page at a time, until none is left
            url = f"{api.base}/v1/ops/tenants/{TENANT}/memory"
            listed = requests.get(url, params={"subject": vendor}, headers=api.operator, timeout=60)
            listed.raise_for_status()
            memories = listed.json()["memories"]
            if not memories:
                break
            for memory in memories:
                gone = requests.delete(f"{url}/{memory['memory_id']}", headers=api.operator, timeout=60)
                gone.raise_for_status()


def compare_routes(
    platform: Any,
    chosen: Sequence[Dataset],
    routes: Sequence[str],
    *,
    repeat: int,
    small: bool,
    set_route: Any,
) -> dict[str, Any]:
    """Every chosen case `repeat` times on each route (`set_route(route)` sends every model step to it)."""
    api = Api(platform)
    report: dict[str, Any] = {"routes": {}, "repeat": repeat, "set": "small" if small else "full"}
    for route in routes:
        set_route(route)
        runs: list[RunRecord] = []
        for dataset in chosen:
            for case in (c for c in dataset.cases if c.small or not small):
                for _ in range(repeat):
                    forget(api, [*case.notices, *case.clean_vendors])  # each run from the same memory: none
                    score = SCORERS[dataset.workflow](platform, api, case)
                    runs.append(read_run(api, dataset.workflow, score))
        report["routes"][route] = {"summary": summarize_route(runs), "runs": [asdict(r) for r in runs]}
    return report


def print_comparison(report: Mapping[str, Any], out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    routes = list(report["routes"])
    table = Table(title=f"routes compared: {report['set']} set, each case {report['repeat']}x", title_justify="left")
    table.add_column("figure")
    for route in routes:
        table.add_column(route, justify="right")
    for metric, label in LABELS.items():
        cells = [report["routes"][r]["summary"].get(metric) for r in routes]
        table.add_row(label, *("-" if v is None else f"{v:g}" for v in cells))
    Console(file=out, width=160).print(table)
