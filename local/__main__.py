"""`python -m local`: run Longhaul on this machine (in-memory AWS via moto, API on 127.0.0.1:8000).

Environment: LONGHAUL_PORT (API port, default 8000), LONGHAUL_MOTO_PORT (default 8001, 0 = any free port),
LONGHAUL_LOCAL_KEYS ("alpha=key1,beta=key2,ops=key3:operator,alpha-reviewer=key4:reviewer@alpha"),
LONGHAUL_LOCAL_WEBHOOK_SECRETS ("alpha=whsec_…"), LONGHAUL_CALLBACK_ALLOWLIST ("http://127.0.0.1:9000": local
webhook receivers, plain http allowed), LONGHAUL_LOG_LEVEL (default INFO),
LONGHAUL_FAULTS (fault injection, e.g. "parse_documents#1=invalid-inputx1,draft_answer=transientx2", or the runtime
kinds `hang`, `duplicate`, `crash-after-side-effect`, `slow`), OTEL_EXPORTER_OTLP_ENDPOINT (an OTLP/HTTP collector,
e.g. "http://127.0.0.1:4318", that receives every span as well), LONGHAUL_TIME_SCALE (default 1; e.g. 0.01 makes
the local Step Functions interpreter's Retry backoffs, Task timeouts and Wait states 100x shorter), LONGHAUL_TIMINGS
(`1` prints where the seconds to serving went: make and the virtualenv check, imports, synthesis or its cache, moto,
deploy, seeding, front door).
"""

from __future__ import annotations

import time

_STARTED = time.time()  # before the imports below (moto, boto3, the local runtime): they are a phase of their own

import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import warnings  # noqa: E402

from local import lambda_runtime  # noqa: E402
from local.platform import LocalPlatform  # noqa: E402

_IMPORTED = time.time()

DEFAULT_API_PORT = 8000
DEFAULT_MOTO_PORT = 8001
#: Multiplies the local interpreter's waits (`0.1`: ten times faster; empty: 1).
TIME_SCALE_ENV = "LONGHAUL_TIME_SCALE"
#: `1`: `make run` prints where its seconds to serving went.
TIMINGS_ENV = "LONGHAUL_TIMINGS"
#: `make run` sets it to the time make started (seconds since the epoch), so the report includes make's checks.
MAKE_STARTED_ENV = "LONGHAUL_MAKE_STARTED"
_PHASES = {
    "synth": "synthesis (no cached assembly for these sources)",
    "synth_reused": "synthesis: cached assembly re-used",
    "moto_start": "in-memory AWS (moto) start and patches",
    "deploy": "deploy into moto",
    "seed": "seeding (keys, policies, secrets, schedules)",
    "front_door": "front door (API server)",
}
#: The API's port on 127.0.0.1.
PORT_ENV = "LONGHAUL_PORT"
#: The in-memory AWS endpoint's port on 127.0.0.1 (presigned upload URLs point here).
MOTO_PORT_ENV = "LONGHAUL_MOTO_PORT"
#: Fault injection: `<step>[#<item>]=<kind>[x<times>],…` (the fault kinds: the manual's fault reference).
FAULTS_ENV = "LONGHAUL_FAULTS"
#: The log level of the local platform and of a worker task (`DEBUG`, `INFO`, `WARNING`…).
LOG_LEVEL_ENV = "LONGHAUL_LOG_LEVEL"


def _quiet_moto() -> None:
    """Silence per-request access logs and moto's notices about resources it does not model."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    logging.getLogger("moto").setLevel(logging.ERROR)
    logging.getLogger("botocore").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Tried to parse .* but it's not supported", category=UserWarning)


def banner(platform: LocalPlatform) -> str:
    api = platform.api_url or "(no REST API in the stack)"
    console = f"{platform.api_url}/console   (sign in with a key below)" if platform.api_url else "(none)"
    first = platform.keys[0].key if platform.keys else "<key>"
    keys = "\n".join(f"    {k.tenant:<8} {k.role:<9} {k.key}" for k in platform.keys) or "    (none)"
    secrets = "\n".join(f"    {t:<8} {s}" for t, s in platform.webhook_secrets.items()) or "    (none)"
    timings = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in platform.timings.items())
    issuer = (
        f"  OIDC issuer      {platform.issuer.url}   (a JWT, where a key goes: "
        f".venv/bin/longhaul local token --tenant alpha --role tenant)\n"
        if platform.issuer is not None and platform.issuer.url
        else ""
    )
    d = platform.deployment
    scale = platform.time_scale
    scaled = (
        ""
        if scale == 1
        else f"  Time scale       {scale:g}   (Retry backoffs, Task timeouts/heartbeats, Wait states: x{scale:g})\n"
    )
    return f"""
Longhaul is running locally ({timings}).

  API              {api}
  Console          {console}
  In-memory AWS    {platform.moto_endpoint}   (stack {d.stack_name}; table {d.table_name}; bucket {d.bucket_name})
{scaled}{issuer}  API keys (tenant, role, key):
{keys}
  Webhook signing secrets (tenant, secret; verify deliveries with them):
{secrets}

Submit the sample job and watch it with the command line, from another terminal in this directory
(.venv/bin/longhaul; `source .venv/bin/activate` puts `longhaul` on your PATH):
  export LONGHAUL_URL={api} LONGHAUL_API_KEY={first}
  .venv/bin/longhaul submit samples/request.json --watch
  .venv/bin/longhaul jobs        # and status, events, result, cancel, upload, reviews, ops, ... (--help)

Or with curl (document-analysis; samples/invoice_request.json is an invoice-reconciliation job, and
samples/dispute_request.json disputes a completed one: README, "Dispute resolution"); the same Idempotency-Key
again answers the same job:
  curl -sS -X POST {api}/v1/jobs -H "Authorization: Bearer {first}" \\
       -H "Content-Type: application/json" -H "Idempotency-Key: sample-1" --data @samples/request.json

Then poll it (job_id from the response):
  curl -sS {api}/v1/jobs/<job_id>         -H "Authorization: Bearer {first}"
  curl -sS {api}/v1/jobs/<job_id>/events  -H "Authorization: Bearer {first}"
  curl -sS {api}/v1/jobs/<job_id>/result  -H "Authorization: Bearer {first}"

This is one process with an in-memory AWS, for development, demos and tests: each function runs up to
{lambda_runtime.DEFAULT_CONCURRENCY} invocations at a time, and Ctrl-C stops everything (all state is in memory and is
lost).
"""


def timings_report(timings: dict[str, float], *, make_started: str, started: float, imported: float) -> str:
    """Where the seconds to serving went: before Python (make, the virtualenv check), imports, the platform's
    phases (`LocalPlatform.timings`), and the total since make started (or since Python started)."""
    rows: list[tuple[str, float]] = []
    try:
        origin = float(make_started)
    except ValueError:  # not started by `make run` (or a `date` without %N)
        origin = started
    else:
        rows.append(("make: the virtualenv check (or install), Python start", started - origin))
    rows.append(("imports (moto, boto3, the local runtime)", imported - started))
    rows += [(_PHASES.get(name, name), seconds) for name, seconds in timings.items() if name != "total"]
    accounted = sum(seconds for _, seconds in rows)
    total = time.time() - origin
    rows.append(("other (argument parsing, logging, faults)", max(0.0, total - accounted)))
    width = max(len(label) for label, _ in rows)
    lines = [f"  {label:<{width}}  {seconds:6.2f} s" for label, seconds in rows]
    return "\n".join(["Where the seconds went (LONGHAUL_TIMINGS=1):", *lines, f"  {'total':<{width}}  {total:6.2f} s"])


def _install_faults(spec: str) -> str:
    """Parse and install `LONGHAUL_FAULTS` (a test hook of the local runtime only)."""
    if not spec.strip():
        return ""
    from local import lambda_runtime

    lambda_runtime.ensure_code_root_on_path()
    from longhaul.core import faults
    from longhaul.workflows import REGISTRY

    faults.install(faults.FaultInjector(spec, REGISTRY))
    return spec


def parse_time_scale(value: str) -> float:
    """`LONGHAUL_TIME_SCALE`: a positive number; empty means 1."""
    if not value.strip():
        return 1.0
    try:
        scale = float(value)
    except ValueError:
        raise ValueError(f"expected a positive number, got {value!r}") from None
    if not 0 < scale < float("inf"):
        raise ValueError(f"expected a positive number, got {value!r}")
    return scale


def main() -> int:
    logging.basicConfig(level=os.environ.get(LOG_LEVEL_ENV, "INFO"), format="%(asctime)s %(name)s %(message)s")
    _quiet_moto()
    api_port = int(os.environ.get(PORT_ENV, DEFAULT_API_PORT))
    moto_port = int(os.environ.get(MOTO_PORT_ENV, DEFAULT_MOTO_PORT))
    try:
        fault_spec = _install_faults(os.environ.get(FAULTS_ENV, ""))
    except ValueError as exc:
        print(f"LONGHAUL_FAULTS: {exc}", file=sys.stderr)
        return 2
    try:
        time_scale = parse_time_scale(os.environ.get(TIME_SCALE_ENV, ""))
    except ValueError as exc:
        print(f"{TIME_SCALE_ENV}: {exc}", file=sys.stderr)
        return 2
    print(
        "Starting Longhaul locally: synthesizing (or re-using a cached synthesis) and deploying into moto...",
        flush=True,
    )
    try:
        platform = LocalPlatform.start(moto_port=moto_port, api_port=api_port, time_scale=time_scale)
    except OSError as exc:
        print(f"Could not start: {exc} (set LONGHAUL_PORT / LONGHAUL_MOTO_PORT to free ports)", file=sys.stderr)
        return 1
    stop = threading.Event()
    # Ctrl-C and SIGTERM stop it, also when it was started with SIGINT ignored (a shell's background job, nohup).
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(banner(platform), flush=True)
    if os.environ.get(TIMINGS_ENV, "") == "1":
        report = timings_report(
            platform.timings, make_started=os.environ.get(MAKE_STARTED_ENV, ""), started=_STARTED, imported=_IMPORTED
        )
        print(report + "\n", flush=True)
    if fault_spec:
        print(f"Fault injection is ON: {fault_spec}\n", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:  # a second Ctrl-C while the handler runs
        pass
    finally:
        print("\nStopping...", flush=True)
        platform.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
