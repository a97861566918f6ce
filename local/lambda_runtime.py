"""Runs Lambda functions in-process: moto's Lambda `invoke` lands here (see `moto_patches`).

The handler named by the deployed function (e.g. `handlers.steps.parse_documents`) is imported from the
code root (the repository's `lambdas/` directory, on `sys.path`) and called with a Lambda-like context.
The function's environment is given through `longhaul.core.settings.function_environment` (a context variable):
`os.environ` is never touched per invocation, since other threads copy it concurrently.

Each function behaves as a pool of warm sandboxes: up to `concurrency_of(fn)` invocations of it run at once (its
`ReservedConcurrentExecutions` when the template sets one, else `DEFAULT_CONCURRENCY`, see `configure`); the
next one waits for a free slot, held by the whole invocation (middlewares included: a `hang` fault holds its sandbox,
as a hung invocation does on AWS), so a 1,000-item Map does not run 1,000 handlers at once. The sandboxes share one
interpreter, so what a handler keeps per request is per thread: the API's resolver state (`handlers.resolver`), the
logger's keys (`longhaul.core.observability`), the function environment (a context variable); the shared objects are
thread-safe (boto3 clients, built once per process under a lock; the settings and services caches; the fault
injector).

A handler exception is reported exactly like AWS: header `x-amz-function-error: Unhandled` and a payload
`{"errorType", "errorMessage", "stackTrace"}`; Step Functions matches Retry/Catch on `errorType`.

An exception carrying a string `error_type` attribute is reported with that `errorType` (e.g. `CrashFault`, a
`BaseException` simulating the process dying, becomes `Runtime.ExitError`; a simulated timeout `Sandbox.Timedout`);
other `BaseException`s (KeyboardInterrupt, SystemExit) still propagate.

Fault injection: `add_middleware(fn)` registers `fn(invocation, call_next)`, called around every invocation
(outermost first). It may inspect or replace `invocation.event`, raise (the exception becomes the function
error), delay, or return a result without calling `call_next`. `runtime_faults` is the built-in one (installed by
`LocalPlatform`): it fires the `hang` and `duplicate` kinds of `longhaul.core.faults` for step invocations.

Time scale: `time_scale()` is the factor every local wait is multiplied by (the Step Functions interpreter's Retry
backoffs, Task timeouts and heartbeats, Wait states, see `moto_patches.scale_interpreter_waits`; and the `hang`
fault). `scaled_wait` is the one primitive they share: it re-reads the scale while it waits, so
`set_time_scale` also shortens waits already in progress, and it returns early when told to stop.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import logging
import math
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

LOG = logging.getLogger(__name__)  # not under "longhaul" (the handlers' Powertools logger: it does not propagate)
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CODE_ROOT = REPO_ROOT / "lambdas"

Handler = Callable[[Any, Any], Any]
#: Concurrent invocations of one function when its template sets no reserved concurrency (Lambda's unreserved
#: concurrency is per account; locally a bound per function keeps a large fan-out from starting a thread per item).
DEFAULT_CONCURRENCY = 10


@dataclass
class LambdaContext:
    """The attributes of the AWS Lambda Python context object that handlers and Powertools read."""

    function_name: str
    function_version: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    aws_request_id: str
    log_group_name: str
    log_stream_name: str
    deadline: float = field(repr=False)
    identity: Any = None
    client_context: Any = None

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@dataclass
class Invocation:
    """One call of a function, as seen by middlewares."""

    function_name: str
    handler: str
    event: Any
    context: LambdaContext
    environment: Mapping[str, str]
    invocation_type: str = "RequestResponse"
    timeout: float = 3.0  # the function's configured timeout, seconds
    concurrency: int = DEFAULT_CONCURRENCY  # how many invocations of this function may run at once


class Middleware(Protocol):
    def __call__(self, invocation: Invocation, call_next: Callable[[], Any]) -> Any: ...


class FunctionSpec(Protocol):
    """The attributes of moto's `LambdaFunction` this module reads."""

    @property
    def function_name(self) -> str: ...
    @property
    def function_arn(self) -> str: ...
    @property
    def handler(self) -> str | None: ...
    @property
    def environment_vars(self) -> dict[str, str]: ...
    @property
    def timeout(self) -> int: ...
    @property
    def memory_size(self) -> int: ...
    @property
    def version(self) -> Any: ...


class Waker:
    """An event a `scaled_wait` can also be woken from without it being set: `wake_waits` nudges every `Waker`
    waited on, when the time scale changes or an execution stops, so the wait re-reads them at once instead of
    polling for them every `WAIT_SLICE_SECONDS` (a thread per waiting Task, each waking 20 times a second, cost a
    1,000-document job a quarter of its CPU)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._flag = False

    def set(self) -> None:
        with self._cond:
            self._flag = True
            self._cond.notify_all()

    def clear(self) -> None:
        with self._cond:
            self._flag = False

    def is_set(self) -> bool:
        return self._flag

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is set, after at most `timeout` seconds (sooner when set or nudged)."""
        with self._cond:
            if not self._flag:
                self._cond.wait(timeout)
            return self._flag

    def nudge(self) -> None:
        with self._cond:
            self._cond.notify_all()


class _Runtime:
    def __init__(self) -> None:
        self.code_root = DEFAULT_CODE_ROOT
        self.environment_overrides: dict[str, str] = {}
        self.middlewares: list[Middleware] = []
        self.handlers: dict[str, Handler] = {}
        self.locks: dict[str, threading.Lock] = {}
        self.locks_guard = threading.Lock()
        self.default_concurrency = DEFAULT_CONCURRENCY
        self.slots: dict[tuple[str, int], threading.BoundedSemaphore] = {}  # (function ARN, bound) -> its slots
        self.time_scale = 1.0
        self.interrupt = Waker()  # set (and replaced) by `interrupt_waits`
        self.hanging: dict[str, str] = {}  # request id -> function name, while a `hang` fault waits


_RUNTIME = _Runtime()
#: Longest real-time slice a `scaled_wait` on an event it cannot be woken from (a `threading.Event` of moto's) blocks
#: before re-checking the scale and its stop condition.
WAIT_SLICE_SECONDS = 0.05
#: The same for a wait that is woken when the scale changes or an execution stops (`Waker`, or no event): a safety
#: net for a stop nothing announced (an execution's timeout is announced; see `wake_waits`), not its way to notice one.
WAKEABLE_SLICE_SECONDS = 1.0


_WAITING: set[Waker] = set()  # the wakers `scaled_wait` is waiting on now
_WAITING_LOCK = threading.Lock()


def wake_waits() -> None:
    """Make every wakeable `scaled_wait` re-read the scale and its stop condition now."""
    with _WAITING_LOCK:
        waiting = list(_WAITING)
    for waker in waiting:
        waker.nudge()


# --- time scale ----------------------------------------------------------------------------------------------


def time_scale() -> float:
    """The factor local waits are multiplied by (1.0 = real time; 0.01 = a 60 s timeout fires after 0.6 s)."""
    return _RUNTIME.time_scale


def set_time_scale(scale: float) -> None:
    """Change the time scale (takes effect at once, also for waits in progress)."""
    scale = float(scale)
    if not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"time scale must be a positive finite number, got {scale!r}")
    _RUNTIME.time_scale = scale
    wake_waits()


def scaled_wait(
    seconds: float | None,
    *,
    event: threading.Event | Waker | None = None,
    stop: Callable[[], bool] | None = None,
    min_real: float = 0.0,
) -> bool:
    """Wait `seconds` of local time (real time x `time_scale()`, re-read every slice); None waits without limit.

    Returns True as soon as `event` is set, False when the time is up or `stop()` becomes true. A wait on a `Waker`
    (or on no event) re-reads the scale and `stop()` whenever `wake_waits` is called, and at least every
    `WAKEABLE_SLICE_SECONDS`; a wait on a `threading.Event` every `WAIT_SLICE_SECONDS`. `min_real`: the wait lasts at
    least min(`seconds`, `min_real`) real seconds, whatever the scale (a timeout guarding work that runs at real
    speed).
    """
    remaining = math.inf if seconds is None else float(seconds)
    floor_until = time.monotonic() + min(remaining, max(min_real, 0.0))
    waker: threading.Event | Waker = event if event is not None else Waker()
    wakeable = isinstance(waker, Waker)
    slice_seconds = WAKEABLE_SLICE_SECONDS if wakeable else WAIT_SLICE_SECONDS
    if wakeable:
        with _WAITING_LOCK:
            _WAITING.add(waker)  # type: ignore[arg-type]
    try:
        while True:
            if event is not None and event.is_set():
                return True
            if stop is not None and stop():
                return False
            if remaining <= 0:
                left = floor_until - time.monotonic()
                if left <= 0:
                    return False
                if waker.wait(min(left, slice_seconds)) and event is not None:
                    return True
                continue
            scale = _RUNTIME.time_scale
            started = time.monotonic()
            if waker.wait(min(remaining * scale, slice_seconds)) and event is not None:
                return True
            remaining -= (time.monotonic() - started) / scale
    finally:
        if wakeable:
            with _WAITING_LOCK:
                _WAITING.discard(waker)


def interrupt_waits() -> None:
    """Release every `hang` fault waiting now (platform stop/reset); later waits are unaffected."""
    interrupt, _RUNTIME.interrupt = _RUNTIME.interrupt, Waker()
    interrupt.set()
    wake_waits()


def hanging() -> list[str]:
    """Names of the functions whose invocations a `hang` fault is holding right now."""
    return list(_RUNTIME.hanging.values())


def configure(
    *,
    code_root: Path | None = None,
    environment_overrides: Mapping[str, str] | None = None,
    default_concurrency: int | None = None,
) -> None:
    """Set the code root (default: `<repo>/lambdas`), variables added to every function's environment, and how many
    invocations of a function without reserved concurrency may run at once (default `DEFAULT_CONCURRENCY`)."""
    if code_root is not None:
        _RUNTIME.code_root = Path(code_root)
    if environment_overrides is not None:
        _RUNTIME.environment_overrides = dict(environment_overrides)
    if default_concurrency is not None:
        if default_concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {default_concurrency}")
        _RUNTIME.default_concurrency = int(default_concurrency)


def concurrency_of(fn: FunctionSpec) -> int:
    """How many invocations of `fn` may run at once: its reserved concurrency, else the configured default."""
    reserved = getattr(fn, "reserved_concurrency", None)
    try:
        return max(1, int(reserved)) if reserved not in (None, "") else _RUNTIME.default_concurrency
    except (TypeError, ValueError):
        return _RUNTIME.default_concurrency


def environment_overrides() -> dict[str, str]:
    """The variables currently added to every function's environment."""
    return dict(_RUNTIME.environment_overrides)


def add_middleware(middleware: Middleware) -> Callable[[], None]:
    """Register a middleware around every invocation; returns a function that removes it."""
    _RUNTIME.middlewares.append(middleware)
    return lambda: _RUNTIME.middlewares.remove(middleware) if middleware in _RUNTIME.middlewares else None


@contextmanager
def middleware(fn: Middleware) -> Iterator[None]:
    """Context manager form of `add_middleware`."""
    remove = add_middleware(fn)
    try:
        yield
    finally:
        remove()


def _lock_for(key: str) -> threading.Lock:
    with _RUNTIME.locks_guard:
        return _RUNTIME.locks.setdefault(key, threading.Lock())


def _slots_for(function_arn: str, bound: int) -> threading.BoundedSemaphore:
    with _RUNTIME.locks_guard:
        return _RUNTIME.slots.setdefault((function_arn, bound), threading.BoundedSemaphore(bound))


def ensure_code_root_on_path() -> None:
    root = str(_RUNTIME.code_root)
    if root not in sys.path:
        sys.path.insert(0, root)


def resolve_handler(handler: str) -> Handler:
    """Import `module.path.function` from the code root; one lock per handler guards the first import only."""
    cached = _RUNTIME.handlers.get(handler)
    if cached is not None:
        return cached
    with _lock_for("import:" + handler):
        if handler not in _RUNTIME.handlers:
            ensure_code_root_on_path()
            module_name, _, attribute = handler.rpartition(".")
            _RUNTIME.handlers[handler] = getattr(importlib.import_module(module_name), attribute)
        return _RUNTIME.handlers[handler]


def function_environment(fn: FunctionSpec) -> dict[str, str]:
    """The variables a real Lambda sandbox would expose, plus the template's and the configured overrides.

    While IAM is enforced (`moto_patches.iam`), they include the credentials of the function's own role, as a
    sandbox's do: the function's clients sign with them and its calls are authorized against its role's policies.
    """
    region = fn.function_arn.split(":")[3]
    return {
        **_role_environment(fn),
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "AWS_LAMBDA_FUNCTION_NAME": fn.function_name,
        "AWS_LAMBDA_FUNCTION_VERSION": str(fn.version),
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(fn.memory_size),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{fn.function_name}",
        "_HANDLER": fn.handler or "",
        **{k: str(v) for k, v in (fn.environment_vars or {}).items()},
        **_RUNTIME.environment_overrides,
    }


def _role_environment(fn: FunctionSpec) -> dict[str, str]:
    from local.moto_patches import iam

    role = getattr(fn, "role", None)
    if not iam.is_enforcing() or not role:
        return {}
    return iam.role_credentials(str(role), session=fn.function_name[:64]).environment()


def make_context(fn: FunctionSpec) -> LambdaContext:
    request_id = str(uuid.uuid4())
    return LambdaContext(
        function_name=fn.function_name,
        function_version=str(fn.version),
        invoked_function_arn=fn.function_arn,
        memory_limit_in_mb=int(fn.memory_size),
        aws_request_id=request_id,
        log_group_name=f"/aws/lambda/{fn.function_name}",
        log_stream_name=f"{time.strftime('%Y/%m/%d')}/[{fn.version}]{request_id.replace('-', '')}",
        deadline=time.monotonic() + float(fn.timeout or 3),
    )


def error_type(exc: BaseException) -> str:
    """The `errorType` AWS reports: the exception's `error_type` attribute when it has one, else its class name."""
    declared = getattr(exc, "error_type", None)
    return declared if isinstance(declared, str) and declared else type(exc).__name__


def error_payload(exc: BaseException) -> dict[str, Any]:
    """The payload AWS's Python runtime returns for an unhandled exception."""
    return {
        "errorType": error_type(exc),
        "errorMessage": str(exc),
        "stackTrace": traceback.format_list(traceback.extract_tb(exc.__traceback__)),
    }


def _call_chain(invocation: Invocation) -> Any:
    ensure_code_root_on_path()
    from longhaul.core.settings import function_environment as use_environment

    def innermost() -> Any:
        handler = resolve_handler(invocation.handler)
        with use_environment(invocation.environment):
            return handler(invocation.event, invocation.context)

    call: Callable[[], Any] = innermost
    for mw in reversed(list(_RUNTIME.middlewares)):
        call = functools.partial(mw, invocation, call)
    # The slot is the sandbox: held by the whole invocation, middlewares included (a `hang` holds it, as on AWS).
    with _slots_for(invocation.context.invoked_function_arn, invocation.concurrency):
        return call()


def run(fn: FunctionSpec, event: Any, invocation_type: str = "RequestResponse") -> tuple[bytes, bool]:
    """Run `fn` on `event`; returns (JSON payload, errored)."""
    if not fn.handler:
        raise ValueError(f"function {fn.function_name} has no handler (container images are not supported)")
    invocation = Invocation(
        function_name=fn.function_name,
        handler=fn.handler,
        event=event,
        context=make_context(fn),
        environment=function_environment(fn),
        invocation_type=invocation_type,
        timeout=float(fn.timeout or 3),
        concurrency=concurrency_of(fn),
    )
    started = time.monotonic()
    try:
        result = _call_chain(invocation)
    except BaseException as exc:  # every handler failure becomes a function error, as in AWS
        if not isinstance(exc, Exception) and getattr(exc, "error_type", None) is None:
            raise  # KeyboardInterrupt, SystemExit, ...: not a function error
        LOG.info("%s failed after %.0f ms: %s: %s", fn.function_name, _ms(started), error_type(exc), exc)
        return json.dumps(error_payload(exc)).encode(), True
    LOG.debug("%s returned after %.0f ms", fn.function_name, _ms(started))
    return json.dumps(result, default=str).encode(), False


def invoke_integration(function_arn: str, event: Any) -> tuple[bytes, bool]:
    """Invoke a deployed function synchronously as an AWS service's integration does (API Gateway's Lambda proxy):
    the same runtime, middlewares, timeout and concurrency as `Invoke`, without a round trip through moto's Lambda API
    (a serialized event, an HTTP request to the server and its dispatch). Returns (JSON payload, errored)."""
    from moto.awslambda.utils import get_backend

    _, _, _, region, account, _ = function_arn.split(":", 5)
    return run(get_backend(account, region).get_function(function_arn), event)


def _ms(started: float) -> float:
    return (time.monotonic() - started) * 1000


def _header(headers: Any, name: str, default: str) -> str:
    for key, value in dict(headers or {}).items():
        if key.lower() == name:
            return str(value)
    return default


def invoke(
    self: Any,
    function_name: str,
    qualifier: str | None,
    body: Any,
    headers: Any,
    response_headers: Any,
) -> bytes:
    """Replacement for `moto.awslambda_simple.models.LambdaSimpleBackend.invoke`."""
    fn: FunctionSpec = self.get_function(function_name, qualifier)
    event = json.loads(body) if body else {}
    invocation_type = _header(headers, "x-amz-invocation-type", "RequestResponse")
    if invocation_type == "Event":
        threading.Thread(target=run, args=(fn, event, invocation_type), daemon=True).start()
        return b""
    if invocation_type == "DryRun":
        return b""
    payload, errored = run(fn, event, invocation_type)
    if errored:
        response_headers["x-amz-function-error"] = "Unhandled"
    response_headers["Content-Length"] = str(len(payload))
    return payload


# --- runtime faults -----------------------------------------------------------------------------------------

#: A Task's scaled timeout never fires before this many real seconds (or its unscaled length, if shorter): the
#: invocation it guards runs at real speed, so at a small scale (0.005: a 45 s timeout is 0.2 s) a loaded machine
#: would time out work that is not hung. A function's first invocation builds its clients under its role's credentials
#: first: on a busy 2-core machine that took over 2 s twice running (a dead webhook's recorder, both attempts timed
#: out, so its dead letter was never sent). A `hang` is held at least a second longer, so the Task still times out
#: first.
TASK_TIMEOUT_FLOOR_SECONDS = 4.0

#: A `hang` outlives the function's own timeout by this much (local seconds): the house policy sets a Task's
#: `TimeoutSeconds` to the function's timeout + 15 s, so the interpreter times the Task out first.
HANG_MARGIN_SECONDS = 30.0


class FunctionTimedOut(Exception):
    """What AWS reports when an invocation outlives its function's timeout."""

    error_type = "Sandbox.Timedout"


def is_step_event(event: Any) -> bool:
    """A step invocation's payload (`longhaul.core.step_events.StepEvent`); a failure record (`FailureEvent`) is not."""
    if not isinstance(event, Mapping):
        return False
    ensure_code_root_on_path()
    from longhaul.core.step_events import StepEvent

    required = [name for name, info in StepEvent.model_fields.items() if info.is_required()]
    return all(name in event for name in required) and isinstance(event.get("step"), str)


def runtime_faults(invocation: Invocation, call_next: Callable[[], Any]) -> Any:
    """The built-in middleware firing the runtime fault kinds of `longhaul.core.faults` for step invocations.

    `duplicate`: the event is delivered twice (the handler runs twice, one after the other, each with its own
    request id); the second result is returned, as an at-least-once redelivery would. `hang`: the handler is not
    called; the invocation blocks for the function's timeout + `HANG_MARGIN_SECONDS` (scaled, released by
    `interrupt_waits`), then fails with `Sandbox.Timedout`; by then the interpreter has timed the Task out. A grouped
    fan-out's group fires them at their own item (`_group_faults`).
    """
    event = invocation.event
    if not is_step_event(event):
        return call_next()
    ensure_code_root_on_path()
    from longhaul.core import faults

    item = event.get("item")
    group = event.get("items")
    job_id = str((event.get("input") or {}).get("job_id", ""))  # `x<times>` counts per job
    if isinstance(group, list):  # a grouped fan-out's group: its items run in order, a fault fires at its own item
        return _group_faults(invocation, call_next, faults.active(), event["step"], group, job_id)
    kind = faults.active().take(
        event["step"], item if isinstance(item, int) else None, (faults.HANG, faults.DUPLICATE), job_id=job_id
    )
    return _fire(invocation, call_next, kind)


def _group_faults(
    invocation: Invocation, call_next: Callable[[], Any], injector: Any, step: str, group: list[Any], job_id: str
) -> Any:
    """A group's first item with a `hang` or `duplicate` rule fires it: a duplicate delivers the whole group twice;
    a hang lets the items before it run (and commit), then holds the invocation as an item's hang would."""
    from longhaul.core import faults

    for position, entry in enumerate(group):
        index = entry.get("index") if isinstance(entry, Mapping) else None
        kind = injector.take(
            step, index if isinstance(index, int) else None, (faults.HANG, faults.DUPLICATE), job_id=job_id
        )
        if kind is None:
            continue
        if kind == faults.HANG and position > 0:
            event = invocation.event
            invocation.event = {**event, "items": group[:position]}
            try:
                call_next()
            except Exception as exc:  # it hangs next whatever this part's outcome
                LOG.info("%s: items before a hang failed: %s: %s", invocation.function_name, error_type(exc), exc)
            finally:
                invocation.event = event
        return _fire(invocation, call_next, kind)
    return call_next()


def _fire(invocation: Invocation, call_next: Callable[[], Any], kind: str | None) -> Any:
    """Deliver the invocation as the runtime fault `kind` says (None: as it is)."""
    from longhaul.core import faults

    if kind == faults.DUPLICATE:
        try:
            call_next()
        except Exception as exc:  # the first delivery's outcome is lost, like a redelivered message's
            LOG.info("%s: first of a duplicate delivery failed: %s: %s", invocation.function_name, error_type(exc), exc)
        context = invocation.context
        invocation.context = dataclasses.replace(
            context, aws_request_id=str(uuid.uuid4()), deadline=time.monotonic() + invocation.timeout
        )
        return call_next()
    if kind == faults.HANG:
        request_id = invocation.context.aws_request_id
        _RUNTIME.hanging[request_id] = invocation.function_name
        try:
            scaled_wait(
                invocation.timeout + HANG_MARGIN_SECONDS,
                event=_RUNTIME.interrupt,
                min_real=TASK_TIMEOUT_FLOOR_SECONDS + 1.0,
            )
        finally:
            _RUNTIME.hanging.pop(request_id, None)
        raise FunctionTimedOut(f"Task timed out after {invocation.timeout:.2f} seconds")
    return call_next()


def install_runtime_faults() -> Callable[[], None]:
    """Install `runtime_faults` as the outermost middleware (idempotent); returns a function that removes it."""
    if runtime_faults not in _RUNTIME.middlewares:
        _RUNTIME.middlewares.insert(0, runtime_faults)
    return lambda: _RUNTIME.middlewares.remove(runtime_faults) if runtime_faults in _RUNTIME.middlewares else None
