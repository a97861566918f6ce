"""Typed errors: the contract with the state machine.

The class name of each error is the ASL error name that Retry and Catch match (a Lambda function error's
`errorType`), so never rename a class without changing the state machine builder's policy with it.
"""

from __future__ import annotations


class LonghaulError(Exception):
    """Base class. `kind` is the stable, user-facing name of the failure class."""

    kind = "internal"
    retryable = False

    def __init__(self, message: str, *, step: str | None = None, item: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.step = step
        self.item = item


class TransientError(LonghaulError):
    """A failure that may succeed when tried again (network blip, throttled dependency)."""

    kind = "transient"
    retryable = True


class RateLimitedError(LonghaulError):
    """A dependency (a model provider) throttled the call; retried with backoff."""

    kind = "rate-limited"
    retryable = True


class UpstreamUnavailableError(LonghaulError):
    """A dependency (a model provider, a tool's service) is unavailable; retried with backoff."""

    kind = "upstream-unavailable"
    retryable = True


class InvalidInputError(LonghaulError):
    """The job's input cannot be processed; retrying will not help."""

    kind = "invalid-input"


class OutputInvalidError(LonghaulError):
    """A model's output failed validation even after repair."""

    kind = "output-invalid"


class PolicyRefusalError(LonghaulError):
    """The model (or its provider's guardrail) refused the request; retrying will not help."""

    kind = "policy-refusal"


class BudgetExceededError(LonghaulError):
    """The call would exceed the job's budget or the tenant's daily allowance."""

    kind = "budget-exceeded"


class InternalError(LonghaulError):
    """An unexpected failure of the platform itself."""

    kind = "internal"


class PlatformConfigurationError(LonghaulError):
    """The deployment is missing something only its operators can enable (e.g. Bedrock model access).

    Not the tenant's fault and not transient: never retried, counted by a metric that an alarm watches.
    """

    kind = "platform-misconfigured"


class CancelledError(LonghaulError):
    """The job was cancelled; the step stops without committing."""

    kind = "cancelled"


class JobPaused(LonghaulError):
    """The job was paused: the step stops at its boundary without starting its work, and the state machine waits
    for the resume (a task token, no compute held), then enters the same step again."""

    kind = "paused"


class AgentLimitError(LonghaulError):
    """An agent step reached one of its limits (turns, tool calls, the job's deadline or budget) before it finished;
    the message starts with the limit's name (`max_turns`, `max_tool_calls`, `deadline`, `budget`)."""

    kind = "agent-limit"

    def __init__(self, message: str, *, step: str | None = None, item: int | None = None, limit: str = "") -> None:
        super().__init__(message, step=step, item=item)
        self.limit = limit or message.split(":", 1)[0]

    @classmethod
    def reached(cls, limit: str, detail: str, *, step: str, item: int | None = None) -> AgentLimitError:
        return cls(f"{limit}: {detail}", step=step, item=item, limit=limit)


class SignalTimedOut(LonghaulError):
    """A signal step's wait ended without its signal, and the step says `on_timeout="fail"`."""

    kind = "timeout"


class SegmentTimedOut(LonghaulError):
    """A segment (a group of steps bounded together) ran past its bound."""

    kind = "timeout"


class ChildFailed(LonghaulError):
    """A child step's job (another workflow's job this one started and waited for) failed, was cancelled or expired:
    the step fails with kind `child_failed`; the job's error `detail` names the child and carries its error."""

    kind = "child_failed"


# Raised by the platform only (never injected as a fault): their kind is `timeout`, like a Task's own timeout.
TIMEOUT_CLASSES: tuple[type[LonghaulError], ...] = (SignalTimedOut, SegmentTimedOut)


ERROR_CLASSES: tuple[type[LonghaulError], ...] = (
    TransientError,
    RateLimitedError,
    UpstreamUnavailableError,
    InvalidInputError,
    OutputInvalidError,
    PolicyRefusalError,
    BudgetExceededError,
    InternalError,
    PlatformConfigurationError,
    CancelledError,
    JobPaused,
    AgentLimitError,
)
BY_KIND: dict[str, type[LonghaulError]] = {cls.kind: cls for cls in ERROR_CLASSES}
RETRYABLE_ERROR_NAMES: tuple[str, ...] = tuple(cls.__name__ for cls in ERROR_CLASSES if cls.retryable)
DETERMINISTIC_ERROR_NAMES: tuple[str, ...] = tuple(cls.__name__ for cls in ERROR_CLASSES if not cls.retryable)


def kind_of(error_name: str) -> str:
    """The failure class (kind) for an ASL error name; unknown names are `internal`."""
    for cls in ERROR_CLASSES:
        if cls.__name__ == error_name:
            return cls.kind
    if error_name in ("States.Timeout", "Sandbox.Timedout", *(cls.__name__ for cls in TIMEOUT_CLASSES)):
        return "timeout"
    if error_name == ChildFailed.__name__:
        return ChildFailed.kind
    return "internal"


# The state machine's summary error of a fan-out whose items failed (each item sent its own dead letter).
ITEMS_FAILED = "ItemsFailed"
# The errors of the state machines' Fail states: the failure was recorded (the job failed), or the job stopped.
STEP_FAILED = "StepFailed"
JOB_STOPPED = "JobStopped"
# What a paused step raises (and a fan-out's paused item fails with): the state machine catches it into a pause wait.
JOB_PAUSED = JobPaused.__name__


class WebhookDeliveryFailed(LonghaulError):
    """A webhook attempt did not get a 2xx answer: the delivery state machine retries it with backoff and jitter.

    Not one of the step classes: a delivery is not a step of a job and its failure never changes the job."""

    kind = "webhook-undelivered"
    retryable = True


class WebhookUndeliverable(LonghaulError):
    """A webhook that no retry can deliver (its URL is now refused, the tenant has no secret): dead at once."""

    kind = "webhook-undeliverable"
