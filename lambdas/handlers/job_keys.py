"""The log keys of a job's work (`JOB_LOG_KEYS`) for the functions whose event does not carry the job's correlation
id — the failure recorder, the Distributed Map's tally, the steer and compensation lanes: read from the job, once per
invocation (their paths are rare: a failure, a wide fan-out, a pause or a signal, a saga). `lane_invocation` binds
them and meters the invocation into the job's cost, as a step's is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from longhaul.core.observability import bind_job, logger
from longhaul.core.records import version_number
from longhaul.engine.usage import recording
from longhaul.services import Services


def bind_job_keys(services: Services, job_id: str | None, **keys: Any) -> None:
    """Bind the job's keys (its trace id from its correlation id, its workflow version) and `keys` to every later log
    line of this invocation; a job that cannot be read binds what the event says, and the work goes on."""
    try:
        job = services.jobs.get_job(job_id) if job_id else None
    except Exception as error:  # the keys of a log line never fail the work they describe
        logger.warning("the job's log keys could not be read", extra={"job_id": job_id, "error": str(error)})
        job = None
    if job is None:
        bind_job(job_id, None, **keys)
        return
    bind_job(job.job_id, job.correlation_id, workflow_version=version_number(job.state_machine_version), **keys)


@contextmanager
def lane_invocation(services: Services, job_id: str | None, **keys: Any) -> Iterator[None]:
    """A lane function's invocation for the job `job_id`: its log keys bound (`bind_job_keys`), its compute time and
    requests added to the job's counters when it ends (`longhaul.engine.usage.recording`), whatever its outcome."""
    bind_job_keys(services, job_id, **keys)
    with recording(services, job_id):
        yield
