"""The house step policy: declared once, applied by the builder to every Task.

These values are the defaults documented in the house step policy's table (docs/concepts/steps.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_logs as logs

from longhaul.core import limits
from longhaul.core.errors import RETRYABLE_ERROR_NAMES, STEP_FAILED

# Lambda service-side failures that are worth retrying (AWS's own recommendation for Lambda tasks).
LAMBDA_SERVICE_ERRORS: tuple[str, ...] = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Runtime.ExitError",  # the function's process died (a crash): the step is idempotent, run it again
)
# A Task timeout, or the function's own timeout reported by Lambda.
TIMEOUT_ERRORS: tuple[str, ...] = ("States.Timeout", "Sandbox.Timedout")
# Raised by a step of a job that was cancelled or passed its deadline: the execution just ends.
STOPPED_ERRORS: tuple[str, ...] = ("CancelledError",)


@dataclass(frozen=True)
class StepPolicy:
    """Timeouts and retry classes for steps. Durations are seconds."""

    lambda_timeout: int = 60
    task_timeout_margin: int = 15
    memory_mb: int = 1024
    transient_errors: tuple[str, ...] = RETRYABLE_ERROR_NAMES + LAMBDA_SERVICE_ERRORS
    retry_interval: int = limits.RETRY_INTERVAL_SECONDS
    retry_backoff_rate: float = limits.RETRY_BACKOFF_RATE
    retry_max_attempts: int = limits.RETRY_MAX_ATTEMPTS
    retry_max_delay: int = limits.RETRY_MAX_DELAY_SECONDS
    # `rate-limited` first (Step Functions applies the first retrier whose errors match): longer and further apart.
    rate_limited_errors: tuple[str, ...] = ("RateLimitedError",)
    rate_limited_interval: int = limits.RATE_LIMITED_RETRY_INTERVAL_SECONDS
    rate_limited_max_attempts: int = limits.RATE_LIMITED_RETRY_MAX_ATTEMPTS
    rate_limited_max_delay: int = limits.RATE_LIMITED_RETRY_MAX_DELAY_SECONDS
    # A timeout that recurs on every attempt is retried at most once.
    timeout_max_attempts: int = 1
    map_max_concurrency: int = 8
    # Child executions of a Distributed Map running at once (each runs its batch with `map_max_concurrency`).
    distributed_map_max_concurrency: int = 10
    # A container task must heartbeat within this bound (its worker beats every quarter of it), or it is timed
    # out (`States.Timeout`, retried once) — a worker that hangs or died without reporting.
    container_heartbeat: int = 120
    container_cpu: int = 2048  # 2 vCPU: onnxruntime uses both for one page
    container_memory_mb: int = 4096
    dlq_retention_days: int = 14
    recorder_memory_mb: int = 256
    send_timeout: int = 30  # the dead letter's SendMessage Task
    log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH
    alarm_period_minutes: int = 5  # failed executions
    dead_letter_alarm_period_minutes: int = 1
    job_failed_state: str = "Job failed"
    job_failed_error: str = STEP_FAILED
    job_stopped_state: str = "Job stopped"
    # A paused job's wait on its task token: at most this long at a time; then the step is entered again, which
    # waits again while the job is still paused (or ends it, when its deadline passed meanwhile).
    pause_wait_seconds: int = 900

    def task_timeout(self, lambda_timeout: int | None = None) -> int:
        """TimeoutSeconds of a Task: never below the Lambda's own timeout."""
        return (lambda_timeout or self.lambda_timeout) + self.task_timeout_margin


DEFAULT_POLICY = StepPolicy()
