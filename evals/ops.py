"""Operational and cost evals: jobs run on the local platform under injected faults, and the figures that say how the
platform behaves under them, gated against `evals/ops-baseline.json`.

    make eval-ops                            # every scenario three times (python -m evals --ops)
    make eval-ops-small                      # every scenario once, as `make test` runs it
    python -m evals --ops --update-baseline  # accept the figures as the new baseline

Scenarios (`SCENARIOS`; the project's fault injection, `longhaul.core.faults`): a crash mid-step (after its side
effect, before its checkpoint), a duplicate delivery, a step hanging past its Task timeout, a provider 429 storm (the
model steps rate-limited again and again), a model answer of the wrong shape (the ladder's feedback retry), a cancel
mid-fan-out, a step that always fails (a hopeless job: dead-lettered), and the agent workflow's sending turn
crashing after its e-mail went out; plus one clean job per SLA class. Every job asks for a webhook (a receiver of
this process).

Figures:
- duplicate-execution rate: model calls (the provider asked the same prompt twice within a job) and side effects (an
  e-mail per notice) done twice, over all calls and effects: must be 0;
- resumability success rate: recoverable faulted jobs that reached their expected end (completed; the cancelled one
  cancelled with no item committed after the cancel);
- share restarted from scratch: faulted jobs whose first step ran again;
- DLQ rate: jobs with a message in a dead-letter queue;
- callback success rate: jobs whose webhook was delivered;
- events on the bus, exact: jobs whose status changes reached the EventBridge bus (read from its operators' tap,
  `GET /v1/ops/events`) exactly once each and in the order of the job's log: must be 1;
- queue wait p50/p95 by SLA class (each job's `queue wait` span);
- cost of retries: tokens and dollars of model calls whose answer was not kept (discarded by the ladder, or made by a
  step attempt that failed afterwards), in jobs that completed;
- cost of cancelled and failed jobs (what those jobs were charged);
- time to usable result: submission to the first provisional result (`provisional_result`), else to the result.
Only the rates are gated (queue waits and times follow the machine's load).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import requests

from evals.compare import percentile
from evals.run import ROOT, Api, Case, _events, score_dispute_resolution, sent_messages

BASELINE = Path(__file__).resolve().parent / "ops-baseline.json"
RESULTS = Path(__file__).resolve().parent / "results"
TIME_SCALE = 0.1  # retry backoffs at a tenth of their length
HANG_TIME_SCALE = 0.03  # a hang ends at its (scaled) Task timeout
SLA_CLASSES = ("interactive", "standard", "batch")
# Gated figures: better when higher / when lower (a rise beyond the baseline's by more than the tolerance).
HIGHER_IS_BETTER = ("resumability_success_rate", "callback_success_rate", "bus_events_exact_rate")
LOWER_IS_BETTER = ("duplicate_execution_rate", "restarted_from_scratch_rate", "dlq_rate")
TOLERANCE = 0.0
MUST_BE_ZERO = ("duplicate_execution_rate",)
MUST_BE_ONE = ("bus_events_exact_rate",)
BUS_STATUS_CHANGE = "Job Status Changed"


# --------------------------------------------------------------------------------------------------- scenarios


def _sample() -> dict[str, Any]:
    body: dict[str, Any] = json.loads((ROOT / "samples" / "request.json").read_text())
    return body


def _many_items() -> dict[str, Any]:
    """A job whose evidence extraction fans out over twenty items (one passage each)."""
    filler = "This clause is read together with the schedules and survives termination of the agreement. " * 8
    text = "\n\n".join(f"Clause {n}. The liability cap for service {n} is {n} million. {filler}" for n in range(30))
    return {
        "workflow": "document-analysis",
        "input": {
            "question": "What is the liability cap for each service?",
            "documents": [{"name": "caps.txt", "text": text}],
            "max_passages": 20,
            "passages_per_group": 1,
        },
    }


@dataclass(frozen=True)
class Scenario:
    name: str
    faults: str  # `LONGHAUL_FAULTS` spec
    expect: str  # the status a job reaches when the platform recovers (or ends it) as it should
    request: Callable[[], dict[str, Any]] = _sample
    recoverable: bool = True  # counted in the resumability success rate
    cancel_mid_fan_out: bool = False
    hang: bool = False
    agent: bool = False  # the dispute workflow (a reconciliation first, the review approved)


SCENARIOS = (
    Scenario("crash mid-step", "draft_answer=crash-after-side-effectx1", "completed"),
    Scenario("duplicate delivery", "extract_evidence#0=duplicate,publish_result=duplicate", "completed"),
    Scenario("timeout", "verify_citations=hangx1", "completed", hang=True),
    Scenario("provider 429 storm", "extract_evidence=rate-limitedx3,draft_answer=rate-limitedx2", "completed"),
    Scenario("invalid model output", "draft_answer=schema-invalid-outputx1", "completed"),
    Scenario("cancel mid-fan-out", "", "cancelled", request=_many_items, cancel_mid_fan_out=True),
    Scenario("hopeless step", "verify_citations=invalid-input", "failed", recoverable=False),
    Scenario("agent crash after sending", "send_notices#0=crash-after-side-effectx1", "completed", agent=True),
)


# --------------------------------------------------------------------------------------------------- one job


@dataclass
class OpsRun:
    scenario: str
    job_id: str
    status: str
    expected: str
    recoverable: bool
    faulted: bool
    sla_class: str
    reached: bool = False
    model_calls: int = 0
    model_calls_twice: int = 0
    effects: int = 0
    effects_twice: int = 0
    restarted: bool = False
    steps_run_again: int = 0  # (step, item) started again within an attempt of the job: the fault fired
    dead_lettered: bool = False
    callback: str | None = None
    queue_wait_seconds: float | None = None
    usable_seconds: float | None = None
    retry_tokens: int = 0
    retry_usd: float = 0.0
    cost_usd: float = 0.0
    bus_events: int = 0  # its status changes read from the bus
    bus_exact: bool | None = None  # they were its log's status changes, once each, in order (None: not checked)
    notes: list[str] = field(default_factory=list)


class ProviderCalls:
    """The offline provider's answers in this process, by (model, prompt hash): a prompt asked twice in one job is a
    model call done twice (the platform runs in this process, so its model adapter is this one)."""

    def __init__(self) -> None:
        self.asked: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    @contextmanager
    def counting(self) -> Iterator[None]:
        from longhaul.adapters.models.offline import OfflineExtractiveModel

        generate = OfflineExtractiveModel.generate

        def counted(model: OfflineExtractiveModel, request: Any) -> Any:
            with self._lock:
                self.asked[(model.model_id, request.prompt_hash())] += 1
            return generate(model, request)

        OfflineExtractiveModel.generate = counted  # type: ignore[method-assign]
        try:
            yield
        finally:
            OfflineExtractiveModel.generate = generate  # type: ignore[method-assign]

    def take(self) -> tuple[int, int]:
        """(calls, calls done twice) since the last take."""
        with self._lock:
            calls, twice = sum(self.asked.values()), sum(n - 1 for n in self.asked.values() if n > 1)
            self.asked.clear()
        return calls, twice


@dataclass
class Hooks:
    """A webhook receiver on 127.0.0.1 (every job's `callback_url`)."""

    origin: str = ""
    received: list[bytes] = field(default_factory=list)


@contextmanager
def receiver() -> Iterator[Hooks]:
    hooks = Hooks()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            hooks.received.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hooks.origin = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield hooks
    finally:
        server.shutdown()
        server.server_close()


def _seconds(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def _cancel_mid_fan_out(api: Api, body: Mapping[str, Any]) -> dict[str, Any]:
    """Submit, let the fan-out begin (each item slowed), cancel, wait for the end."""
    from local import lambda_runtime

    first_item_done = threading.Event()

    def slow_items(invocation: Any, call_next: Any) -> Any:
        result = call_next()
        if isinstance(invocation.event, dict) and invocation.event.get("step") == "extract_evidence":
            first_item_done.set()
            time.sleep(0.3)  # each item takes a while: the fan-out is still going when the cancel lands
        return result

    with lambda_runtime.middleware(slow_items):
        job_id = api._json("POST", "/v1/jobs", body)["job_id"]
        if not first_item_done.wait(120):
            raise TimeoutError(f"job {job_id}: the fan-out did not begin")
        api._json("POST", f"/v1/jobs/{job_id}/cancel", {})
        return api.run_until_finished(job_id)


AGENT_CASE = Case(
    id="agent",
    contract="evals/documents/disputes/acme-prices.txt",
    invoices=["evals/documents/disputes/orion-1.txt", "evals/documents/disputes/vega.txt"],
    contacts={"Orion Tools Ltd": "ar@orion.example", "Vega Supply Co": "billing@vega.example"},
)


def run_scenario(platform: Any, api: Api, scenario: Scenario, calls: ProviderCalls, hooks: Hooks) -> OpsRun:
    from longhaul.core import faults
    from longhaul.workflows import REGISTRY

    faults.install(faults.FaultInjector(scenario.faults, REGISTRY))
    if scenario.hang:
        platform.set_time_scale(HANG_TIME_SCALE)
    calls.take()
    try:
        if scenario.agent:
            score = score_dispute_resolution(platform, api, AGENT_CASE)
            job = api._json("GET", f"/v1/jobs/{score.job_id}")
        else:
            body = {**scenario.request(), "callback_url": f"{hooks.origin}/hooks"}
            job = _cancel_mid_fan_out(api, body) if scenario.cancel_mid_fan_out else api.run(body)
    finally:
        faults.install(faults.FaultInjector())
        platform.set_time_scale(TIME_SCALE)
    made, twice = calls.take()
    return read_run(platform, api, job, scenario, made, twice)


def read_run(platform: Any, api: Api, job: dict[str, Any], scenario: Scenario, made: int = 0, twice: int = 0) -> OpsRun:
    job_id = job["job_id"]
    run = OpsRun(
        scenario.name,
        job_id,
        job["status"],
        scenario.expect,
        scenario.recoverable,
        bool(scenario.faults or scenario.cancel_mid_fan_out),
        str(job.get("sla_class") or "standard"),
        model_calls=made,
        model_calls_twice=twice,
    )
    events = _events(api, job_id)
    run.reached = job["status"] == scenario.expect
    if scenario.cancel_mid_fan_out and run.reached:
        run.reached = not _committed_late(platform, job_id, events)
    # the first step ran again within one attempt of the job
    first = next((e["step"] for e in events if e["type"] == "step_started"), None)
    attempt, starts = 1, Counter[int]()
    for event in events:
        if event["type"] == "job_replayed":
            attempt = event["detail"]["attempt"]
        elif event["type"] == "step_started" and event["step"] == first and event.get("item") is None:
            starts[attempt] += 1
    run.restarted = any(n > 1 for n in starts.values())
    again = Counter((e["step"], e.get("item")) for e in events if e["type"] == "step_started")
    run.steps_run_again = sum(n - 1 for n in again.values())
    # side effects: each acted outcome, and the e-mails carrying its operation id
    done = [e["detail"] for e in events if e["type"] == "effect_done" and e["detail"].get("acted")]
    operations = Counter(str(d["operation_id"]) for d in done)
    mail = sent_messages() if operations else []
    for operation, acted in operations.items():
        mailed = sum(1 for m in mail if operation in m.body and "retract" not in str(m.subject).lower())
        run.effects += 1
        run.effects_twice += max(acted, mailed) > 1
    run.cost_usd = float((job.get("cost") or {}).get("total") or 0)
    if job["status"] == "completed":
        run.retry_tokens, run.retry_usd = cost_of_retries(events)
    provisional = next((e["at"] for e in events if e["type"] == "provisional_result"), None)
    usable = provisional or (job.get("finished_at") if job["status"] == "completed" else None)
    run.usable_seconds = round(_seconds(job["created_at"], usable), 3) if usable else None
    trace = requests.get(f"{api.base}/v1/jobs/{job_id}/trace", headers=api.tenant, timeout=60)
    if trace.ok:
        waits = [_seconds(s["start"], s["end"]) for s in trace.json()["spans"] if s["name"] == "queue wait"]
        run.queue_wait_seconds = round(waits[0], 4) if waits else None
    return run


def _committed_late(platform: Any, job_id: str, events: Sequence[Mapping[str, Any]]) -> bool:
    """An item or step of the job committed after its cancel was requested (a commit is conditional on a running
    job)."""
    from local.recording import reader
    from longhaul.core.clock import parse_iso

    requested = next((parse_iso(e["at"]) for e in events if e["type"] == "cancel_requested"), None)
    committed = [r for r in reader(platform, job_id).items("STEP#") if r.get("status") == "succeeded"]
    return requested is not None and any(parse_iso(str(r["finished_at"])) > requested for r in committed)


def cost_of_retries(events: Sequence[Mapping[str, Any]]) -> tuple[int, float]:
    """Tokens and dollars of the model calls whose answer was not kept: the ladder discarded it (a validation
    failure not repaired), or the step attempt that made it failed afterwards."""
    pending: dict[tuple[Any, Any], list[Mapping[str, Any]]] = {}  # (step, item) -> calls of its current attempt
    wasted: list[Mapping[str, Any]] = []
    for event in events:
        where, detail = (event.get("step"), event.get("item")), event.get("detail") or {}
        kind = event["type"]
        if kind == "model_called":
            pending.setdefault(where, []).append(detail)
        elif kind == "output_validation_failed" and pending.get(where):
            wasted.append(pending[where].pop())
        elif kind == "step_attempt_failed":
            wasted += pending.pop(where, [])
        elif kind == "step_finished":
            pending.pop(where, None)
    tokens = sum(int(c.get("input_tokens", 0)) + int(c.get("output_tokens", 0)) for c in wasted)
    return tokens, round(sum(float(c.get("cost_usd") or 0) for c in wasted), 6)


def dead_lettered_jobs(platform: Any) -> set[str]:
    """Every job with a message in one of the platform's dead-letter queues (left visible)."""
    sqs = platform.client("sqs")
    found: set[str] = set()
    for lid, url in platform.deployment.queues.items():
        if "dlq" not in lid.lower():
            continue
        for _ in range(20):
            messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0).get(
                "Messages", []
            )
            for message in messages:
                try:
                    found.add(str(json.loads(message["Body"]).get("job_id")))
                except (ValueError, AttributeError):
                    continue
            if len(messages) < 10:
                break
    return found


# --------------------------------------------------------------------------------------------------- figures


def figures(runs: Sequence[OpsRun]) -> dict[str, Any]:
    def ratio(part: float, whole: float) -> float | None:
        return round(part / whole, 4) if whole else None

    faulted = [r for r in runs if r.faulted]
    recoverable = [r for r in faulted if r.recoverable]
    calls = sum(r.model_calls + r.effects for r in runs)
    twice = sum(r.model_calls_twice + r.effects_twice for r in runs)
    queue: dict[str, dict[str, float | None]] = {}
    for sla_class in SLA_CLASSES:
        waits = [r.queue_wait_seconds for r in runs if r.sla_class == sla_class and r.queue_wait_seconds is not None]
        queue[sla_class] = {"p50": percentile(waits, 50), "p95": percentile(waits, 95), "jobs": len(waits)}
    ended = [r for r in runs if r.status in ("cancelled", "failed")]
    usable = [r.usable_seconds for r in runs if r.usable_seconds is not None]
    with_callback = [r for r in runs if r.callback is not None]
    checked = [r for r in runs if r.bus_exact is not None]
    return {
        "jobs": len(runs),
        "faulted_jobs": len(faulted),
        "model_calls_and_effects": calls,
        "done_twice": twice,
        "duplicate_execution_rate": ratio(twice, calls) if calls else 0.0,
        "resumability_success_rate": ratio(sum(r.reached for r in recoverable), len(recoverable)),
        "restarted_from_scratch_rate": ratio(sum(r.restarted for r in faulted), len(faulted)),
        "dlq_rate": ratio(sum(r.dead_lettered for r in runs), len(runs)),
        "callback_success_rate": ratio(sum(r.callback == "delivered" for r in with_callback), len(with_callback)),
        "bus_events_exact_rate": ratio(sum(bool(r.bus_exact) for r in checked), len(checked)),
        "bus_status_changes": sum(r.bus_events for r in runs),
        "queue_wait_seconds": queue,
        "retry_tokens": sum(r.retry_tokens for r in runs),
        "retry_usd": round(sum(r.retry_usd for r in runs), 6),
        "cancelled_and_failed_jobs": len(ended),
        "cancelled_and_failed_usd": round(sum(r.cost_usd for r in ended), 6),
        "time_to_usable_result_p50_seconds": percentile(usable, 50),
        "time_to_usable_result_p95_seconds": percentile(usable, 95),
    }


def regressions(now: Mapping[str, Any], baseline: Mapping[str, Any]) -> list[str]:
    found = [f"{m} is {now.get(m)}: it must be 0" for m in MUST_BE_ZERO if now.get(m)]
    found += [f"{m} is {now.get(m)}: it must be 1" for m in MUST_BE_ONE if now.get(m) not in (None, 1.0)]
    for metric in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER):
        was, value = baseline.get(metric), now.get(metric)
        if was is None or metric in MUST_BE_ZERO or (metric in MUST_BE_ONE and now.get(metric) is not None):
            continue
        if value is None:
            found.append(f"{metric}: none, against the baseline's {was}")
            continue
        worse = value < was - TOLERANCE - 1e-9 if metric in HIGHER_IS_BETTER else value > was + TOLERANCE + 1e-9
        if worse:
            found.append(f"{metric} {value} against the baseline's {was}")
    return found


def print_figures(runs: Sequence[OpsRun], found: Mapping[str, Any], out: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=out, width=200)
    jobs = Table(title=f"jobs under faults: {len(runs)}", title_justify="left")
    for column in ("scenario", "class", "status", "expected", "run again", "calls", "twice", "effects", "restarted",
                   "DLQ", "webhook", "queue wait s", "usable s", "retry tokens", "USD"):  # fmt: skip
        jobs.add_column(column, justify="left" if column in ("scenario", "class", "status", "expected") else "right")
    for r in runs:
        jobs.add_row(
            r.scenario, r.sla_class, r.status, r.expected, str(r.steps_run_again), str(r.model_calls),
            str(r.model_calls_twice), str(r.effects), "yes" if r.restarted else "no",
            "yes" if r.dead_lettered else "no", str(r.callback),
            "-" if r.queue_wait_seconds is None else f"{r.queue_wait_seconds:g}",
            "-" if r.usable_seconds is None else f"{r.usable_seconds:g}", str(r.retry_tokens), f"{r.cost_usd:.6f}",
        )  # fmt: skip
    console.print(jobs)
    table = Table(title="operational and cost figures", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("duplicate-execution rate (must be 0)", found["duplicate_execution_rate"]),
        ("  model calls and effects, done twice", f"{found['model_calls_and_effects']}, {found['done_twice']}"),
        ("resumability success rate", found["resumability_success_rate"]),
        ("share restarted from scratch", found["restarted_from_scratch_rate"]),
        ("DLQ rate", found["dlq_rate"]),
        ("callback success rate", found["callback_success_rate"]),
        ("bus events exact: once, in order, per job (must be 1)", found["bus_events_exact_rate"]),
        ("  status changes read from the bus", found["bus_status_changes"]),
        *(
            (f"queue wait p50 / p95, {c} (s)", f"{q['p50']} / {q['p95']} ({q['jobs']} jobs)")
            for c, q in found["queue_wait_seconds"].items()
        ),
        ("cost of retries: tokens", found["retry_tokens"]),
        ("cost of retries: USD", f"{found['retry_usd']:.6f}"),
        ("cost of cancelled and failed jobs: USD", f"{found['cancelled_and_failed_usd']:.6f}"),
        ("time to usable result p50 / p95 (s)",
         f"{found['time_to_usable_result_p50_seconds']} / {found['time_to_usable_result_p95_seconds']}"),
    ]  # fmt: skip
    for label, value in rows:
        table.add_row(label, "-" if value is None else str(value))
    console.print(table)
    for r in runs:
        for note in r.notes[:3]:
            console.print(f"  {r.scenario}: {note}", markup=False, highlight=False)


# --------------------------------------------------------------------------------------------------- the command


def evaluate_ops(platform: Any, *, repeat: int) -> list[OpsRun]:
    api = Api(platform)
    calls = ProviderCalls()
    runs: list[OpsRun] = []
    platform.set_time_scale(TIME_SCALE)
    read_tap(api)  # what the tap holds from before: these jobs are new to its consumer
    with receiver() as hooks, calls.counting():
        platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST=hooks.origin)
        try:
            for sla_class in SLA_CLASSES:  # the clean jobs: one per class
                clean = Scenario(f"clean, {sla_class}", "", "completed")
                body = {**_sample(), "sla_class": sla_class, "callback_url": f"{hooks.origin}/hooks"}
                calls.take()
                job = api.run(body)
                runs.append(read_run(platform, api, job, clean, *calls.take()))
            for _ in range(repeat):
                runs += [run_scenario(platform, api, scenario, calls, hooks) for scenario in SCENARIOS]
            _callbacks(api, runs)
            check_bus(api, runs)
        finally:
            platform.set_function_environment(LONGHAUL_CALLBACK_ALLOWLIST="")
    dead = dead_lettered_jobs(platform)
    for run in runs:
        run.dead_lettered = run.job_id in dead
    return runs


def read_tap(api: Api) -> list[dict[str, Any]]:
    """Everything the bus's operators' tap holds now (each event is answered once); none without a tap."""
    found: list[dict[str, Any]] = []
    while True:
        page = requests.get(f"{api.base}/v1/ops/events", headers=api.operator, params={"limit": 100}, timeout=60)
        if page.status_code != 200:
            return found
        events = page.json()["events"]
        found += events
        if not events:
            return found


def check_bus(api: Api, runs: Sequence[OpsRun], timeout: float = 60) -> None:
    """Each job's status changes as the bus's consumer received them against its log's: the same (seq, status),
    once each, in order. Waits (up to `timeout`) for the ones still on their way."""
    expected = {r.job_id: [(e["seq"], e["status"]) for e in _events(api, r.job_id) if e.get("status")] for r in runs}
    read: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        read += read_tap(api)
        got: dict[str, list[tuple[int, str]]] = {job_id: [] for job_id in expected}
        for event in read:
            detail = event.get("detail") or {}
            if event.get("detail_type") == BUS_STATUS_CHANGE and detail.get("job_id") in got:
                got[detail["job_id"]].append((int(detail["seq"]), str(detail["status"])))
        if all(len(got[j]) >= len(changes) for j, changes in expected.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for run in runs:
        run.bus_events = len(got[run.job_id])
        run.bus_exact = got[run.job_id] == expected[run.job_id]
        if not run.bus_exact:
            run.notes.append(f"bus: {got[run.job_id]} against the log's {expected[run.job_id]}")


def _callbacks(api: Api, runs: Sequence[OpsRun], timeout: float = 30) -> None:
    """Each job's webhook status, once every delivery has settled (delivered or dead) or `timeout` passed."""
    deadline = time.monotonic() + timeout
    for run in runs:
        while True:
            callback = api._json("GET", f"/v1/jobs/{run.job_id}").get("callback") or {}
            run.callback = callback.get("status")
            if run.callback in (None, "delivered", "dead") or time.monotonic() > deadline:
                break
            time.sleep(0.25)


def main_ops(args: Any, out: Any) -> int:
    from local import lambda_runtime
    from local.platform import LocalPlatform

    kind = "small" if args.small else "full"
    repeat = args.repeat if args.repeat > 1 else (1 if args.small else 3)
    running = LocalPlatform.current()
    platform = running or LocalPlatform.start(ROOT, time_scale=TIME_SCALE)
    before, scale = lambda_runtime.environment_overrides(), platform.time_scale
    try:
        runs = evaluate_ops(platform, repeat=repeat)
    finally:
        lambda_runtime.configure(environment_overrides=before)
        platform.set_time_scale(scale)
        if running is None:
            lambda_runtime.interrupt_waits()
            platform.stop()
    found = figures(runs)
    print_figures(runs, found, out)
    stored = json.loads(args.ops_baseline.read_text()) if args.ops_baseline.exists() else {}
    baseline = stored.get(kind, {})
    failed = regressions(found, baseline)
    report = {"set": kind, "repeat": repeat, "figures": found, "runs": [asdict(r) for r in runs], "baseline": baseline,
              "regressions": failed}  # fmt: skip
    target = args.out or RESULTS / f"ops-{kind}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(json.dumps(found, indent=1, sort_keys=True), file=out)
    print(f"figures written to {target}", file=out)
    if args.update_baseline:
        stored[kind] = {m: found[m] for m in (*HIGHER_IS_BETTER, *LOWER_IS_BETTER)}
        args.ops_baseline.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        print(f"baseline updated: {args.ops_baseline} ({kind})", file=out)
        return 0
    for regression in failed:
        print(f"REGRESSION {regression}", file=out)
    if not baseline:
        print(f"no operational baseline for the {kind} set: only the zero duplicates are gated", file=out)
    elif not failed:
        print("no regression against the operational baseline", file=out)
    return 1 if failed else 0
