"""What each step invocation used, added to its job's counters (the job's cost; `longhaul.operations.costs` adds the
state transitions). The lanes' functions (failure recorder, tally, review, steer, compensation) are Lambda tasks of
the job's executions too, billed like a step's: each of their invocations is recorded the same way.

`run_step` runs inside `recording()`, i.e. `metered()`: its compute time and requests are added to the job's counters
with one atomic ADD. A step that commits adds them in its commit's own transaction (`Slip.usage`, then `settled`), so
its happy path makes no request for metering; otherwise (failed, stopped, skipped: each is billed) the ADD is a request
of its own when the invocation ends, counted too. A failure to record is logged, never raised: metering must not fail a
step.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from longhaul.core import metering
from longhaul.core.observability import logger
from longhaul.core.settings import environ
from longhaul.services import Services

# The counters' own ADD: one write request, one write unit.
RECORDING = metering.Metered(dynamodb_requests=1, dynamodb_write_units=1)


class Slip:
    """The invocation's usage so far; `settled` once a transaction has added it to the job. Not `invocation`: a part
    of an invocation another slip counts (a grouped fan-out's item after the group's first), its time and requests
    only."""

    def __init__(self, meter: metering.Meter, *, invocation: bool = True) -> None:
        self._meter = meter
        self._started = time.monotonic()
        self._invocation = invocation
        self.settled = False

    def usage(self) -> metering.Metered:
        compute = metering.current_compute(environ())
        used = self._meter.requests() + metering.compute_usage(compute, time.monotonic() - self._started)
        return used if self._invocation else used.model_copy(update={"lambda_invocations": 0})


@contextmanager
def recording(services: Services, job_id: object, *, invocation: bool = True) -> Iterator[Slip]:
    """Meter the invocation (or, not `invocation`, the part of one) run in this block; add its usage to the counters
    of the job `job_id` (when it is one: an event's field, unchecked) when it ends, unless a transaction of the block
    did (`Slip.settled`)."""
    with metering.metered() as meter:
        slip = Slip(meter, invocation=invocation)
        try:
            yield slip
        finally:
            if isinstance(job_id, str) and not slip.settled:
                try:
                    services.usage.add(job_id, slip.usage() + RECORDING)
                except Exception:
                    logger.exception("step usage not recorded", extra={"job_id": job_id})
