"""What each step invocation used, added to its job's counters (the job's cost; `longhaul.operations.costs` adds the
state transitions).

`run_step` runs inside `recording()`, i.e. `metered()`: when the invocation ends (committed, failed or stopped: each
is billed) its compute time and requests are added to the job's counters with one atomic ADD, counted too. A failure
to record is logged, never raised: metering must not fail a step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from longhaul.core import metering
from longhaul.core.observability import logger
from longhaul.core.settings import environ
from longhaul.services import Services

# The counters' own ADD: one write request, one write unit.
RECORDING = metering.Metered(dynamodb_requests=1, dynamodb_write_units=1)


@contextmanager
def recording(services: Services, raw_event: Mapping[str, object]) -> Iterator[None]:
    """Meter the step invocation run in this block and add its usage to its job's counters when it ends."""
    started = time.monotonic()
    with metering.metered() as meter:
        try:
            yield
        finally:
            state = raw_event.get("input")
            job_id = state.get("job_id") if isinstance(state, Mapping) else None
            if isinstance(job_id, str):
                compute = metering.current_compute(environ())
                usage = meter.requests() + metering.compute_usage(compute, time.monotonic() - started) + RECORDING
                try:
                    services.usage.add(job_id, usage)
                except Exception:
                    logger.exception("step usage not recorded", extra={"job_id": job_id})
