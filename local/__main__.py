"""`python -m local`: run Longhaul on this machine (in-memory AWS via moto, API on 127.0.0.1:8000).

Environment: LONGHAUL_PORT (API port, default 8000), LONGHAUL_MOTO_PORT (default 8001, 0 = any free port),
LONGHAUL_LOCAL_KEYS ("alpha=key1,beta=key2,ops=key3:operator"), LONGHAUL_LOG_LEVEL (default INFO),
LONGHAUL_FAULTS (fault injection, e.g. "draft_answer=transientx2,extract_evidence#3=invalid-input").
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import warnings

from local.platform import LocalPlatform

DEFAULT_API_PORT = 8000
DEFAULT_MOTO_PORT = 8001


def _quiet_moto() -> None:
    """Silence per-request access logs and moto's notices about resources it does not model."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    logging.getLogger("moto").setLevel(logging.ERROR)
    logging.getLogger("botocore").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message="Tried to parse .* but it's not supported", category=UserWarning)


def banner(platform: LocalPlatform) -> str:
    api = platform.api_url or "(no REST API in the stack)"
    first = platform.keys[0].key if platform.keys else "<key>"
    keys = "\n".join(f"    {k.tenant:<8} {k.role:<9} {k.key}" for k in platform.keys) or "    (none)"
    timings = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in platform.timings.items())
    d = platform.deployment
    return f"""
Longhaul is running locally ({timings}).

  API              {api}
  In-memory AWS    {platform.moto_endpoint}   (stack {d.stack_name}; table {d.table_name}; bucket {d.bucket_name})
  API keys (tenant, role, key):
{keys}

Submit the sample job:
  curl -sS -X POST {api}/v1/jobs -H "Authorization: Bearer {first}" \\
       -H "Content-Type: application/json" --data @samples/request.json

Then poll it (job_id from the response):
  curl -sS {api}/v1/jobs/<job_id>         -H "Authorization: Bearer {first}"
  curl -sS {api}/v1/jobs/<job_id>/events  -H "Authorization: Bearer {first}"
  curl -sS {api}/v1/jobs/<job_id>/result  -H "Authorization: Bearer {first}"

Ctrl-C stops everything (all state is in memory and is lost).
"""


def _install_faults(spec: str) -> str:
    """Parse and install `LONGHAUL_FAULTS` (a test hook of the local runtime only)."""
    if not spec.strip():
        return ""
    from local import lambda_runtime

    lambda_runtime.ensure_code_root_on_path()
    from longhaul import faults

    faults.install(faults.FaultInjector(spec))
    return spec


def main() -> int:
    logging.basicConfig(level=os.environ.get("LONGHAUL_LOG_LEVEL", "INFO"), format="%(asctime)s %(name)s %(message)s")
    _quiet_moto()
    api_port = int(os.environ.get("LONGHAUL_PORT", DEFAULT_API_PORT))
    moto_port = int(os.environ.get("LONGHAUL_MOTO_PORT", DEFAULT_MOTO_PORT))
    try:
        fault_spec = _install_faults(os.environ.get("LONGHAUL_FAULTS", ""))
    except ValueError as exc:
        print(f"LONGHAUL_FAULTS: {exc}", file=sys.stderr)
        return 2
    print("Starting Longhaul locally: synthesizing (or re-using cdk.out) and deploying into moto...", flush=True)
    try:
        platform = LocalPlatform.start(moto_port=moto_port, api_port=api_port)
    except OSError as exc:
        print(f"Could not start: {exc} (set LONGHAUL_PORT / LONGHAUL_MOTO_PORT to free ports)", file=sys.stderr)
        return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(banner(platform), flush=True)
    if fault_spec:
        print(f"Fault injection is ON: {fault_spec}\n", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        print("\nStopping...", flush=True)
        platform.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
