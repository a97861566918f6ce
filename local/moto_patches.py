"""Every change Longhaul makes to moto (5.2.5) lives here; each is small, documented and idempotent.

`apply()` installs all of them, `revert()` restores moto's own behaviour (used by the tests that pin the
upstream behaviour each patch works around). Patches replace module attributes or methods; the originals
are kept in `_ORIGINALS` the first time and never overwritten, so applying twice is harmless.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import logging
import threading
import time
import types
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from moto.core.config import DefaultConfig

_ORIGINALS: dict[tuple[int, str], tuple[object, Any]] = {}
_MISSING = object()
LOG = logging.getLogger(__name__)  # not under "longhaul" (the handlers' Powertools logger: it does not propagate)

#: moto user configuration the runtime needs: execute state machines, run Lambda without Docker.
RUNTIME_CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


def _replace(owner: object, name: str, value: object) -> None:
    _ORIGINALS.setdefault((id(owner), name), (owner, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def _restore(owner: object, name: str) -> None:
    saved = _ORIGINALS.pop((id(owner), name), None)
    if saved is not None and saved[1] is not _MISSING:
        setattr(owner, name, saved[1])


def _original(owner: object, name: str) -> Any:
    """The attribute moto had before `_replace` (a replacement called after `revert` finds moto's own again)."""
    saved = _ORIGINALS.get((id(owner), name))
    return saved[1] if saved is not None else getattr(owner, name)


_CONFIG_BEFORE: dict[str, Any] = {}


def enable_execution() -> None:
    """Turn on moto's Step Functions interpreter and the Docker-free Lambda backend.

    Without it, moto's Step Functions backend records executions but never runs them, and Lambda tries Docker.
    """
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    runtime: dict[str, Any] = RUNTIME_CONFIG  # type: ignore[assignment]
    for section, values in runtime.items():
        _CONFIG_BEFORE.setdefault(section, copy.deepcopy(config.get(section, {})))
        config.setdefault(section, {}).update(values)


def disable_execution() -> None:
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    for section, values in _CONFIG_BEFORE.items():
        config[section] = values
    _CONFIG_BEFORE.clear()


def _stepfunctions_modules() -> list[object]:
    import moto.stepfunctions.models

    return [moto.stepfunctions.models]


def route_state_machines_to_interpreter() -> None:
    """Make CloudFormation-created state machines land in the executing (parser) backend.

    `StateMachine.create_from_cloudformation_json` uses the module global `stepfunctions_backends`, the
    non-executing backend, while the API (with `execute_state_machine`) reads `stepfunctions_parser_backends`:
    the stack's machines would be invisible to `start_execution`. Only the models module is rebound: the
    package attribute `moto.stepfunctions.stepfunctions_backends` must stay, the server derives its URL map
    from that backend's module, and `responses.get_backend` already picks the parser backend by config.
    """
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    for module in _stepfunctions_modules():
        _replace(module, "stepfunctions_backends", stepfunctions_parser_backends)


def unroute_state_machines() -> None:
    for module in _stepfunctions_modules():
        _restore(module, "stepfunctions_backends")


def _start_execution_with_generated_name(
    self: Any, state_machine_arn: str, name: str | None = None, *args: Any, **kwargs: Any
) -> Any:
    original = _original(_parser_backend_class(), "start_execution")
    return original(self, state_machine_arn, name or str(uuid.uuid4()), *args, **kwargs)


def _parser_backend_class() -> type:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    return StepFunctionsParserBackend


def name_executions_like_aws() -> None:
    """Give an unnamed execution a UUID name, as AWS does.

    The executing backend uses the missing name as is: every unnamed execution is called `None`, so the
    second unnamed `StartExecution` of a state machine fails with `ExecutionAlreadyExists`.
    """
    _replace(_parser_backend_class(), "start_execution", _start_execution_with_generated_name)


def unname_executions() -> None:
    _restore(_parser_backend_class(), "start_execution")


def run_lambdas_in_process() -> None:
    """Replace the Docker-free Lambda backend's canned `invoke` with a real in-process call of the handler.

    moto's `LambdaSimpleBackend.invoke` echoes the request body; `local.lambda_runtime.invoke` imports the
    function's handler from the repository and runs it (see that module).
    """
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from local.lambda_runtime import invoke

    _replace(LambdaSimpleBackend, "invoke", invoke)


def stop_running_lambdas_in_process() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    _restore(LambdaSimpleBackend, "invoke")


# --- interpreter waits: scaled by the time scale, released when the execution stops --------------------------

_INTERPRETER = threading.local()  # .envs: the interpreter environments of the evaluations on this thread


def _env_stopped(env: Any) -> Callable[[], bool]:
    return lambda: not env.is_running()


def _current_stop() -> Callable[[], bool] | None:
    envs = getattr(_INTERPRETER, "envs", None)
    return _env_stopped(envs[-1]) if envs else None


@contextmanager
def _evaluating(env: Any) -> Iterator[None]:
    envs = _INTERPRETER.__dict__.setdefault("envs", [])
    envs.append(env)
    try:
        yield
    finally:
        envs.pop()


def _scaled_wait(seconds: float | None, **kwargs: Any) -> bool:
    from local.lambda_runtime import scaled_wait

    return scaled_wait(seconds, **kwargs)


class _InterpreterEvent:
    """`threading.Event` for `ExecutionState._evaluate_with_timeout`: its `wait(timeout)` is scaled and stop-aware."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._stop = _current_stop()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return _scaled_wait(timeout, event=self._event, stop=self._stop)


class _ThreadingWithInterpreterEvents(types.ModuleType):
    """Stands in for `threading` in `execute_state`: `Event` is `_InterpreterEvent`, the rest is `threading`'s."""

    Event = _InterpreterEvent

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


class _TimeWithScaledSleep(types.ModuleType):
    """Stands in for `time` in `retrier_decl`: `sleep` is scaled and stop-aware, the rest is `time`'s."""

    @staticmethod
    def sleep(seconds: float) -> None:
        _scaled_wait(seconds, stop=_current_stop())

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _evaluate_with_timeout(self: Any, env: Any) -> None:
    """`ExecutionState._evaluate_with_timeout`, its wait stop-aware; a Task's end after the stop is not a failure.

    When the execution stops (or its frame ends otherwise) while the Task runs, the wait returns early and upstream
    raises `EvalTimeoutError` (or the Task's own error): reported, that would add a TaskTimedOut/TaskFailed event,
    run Retry/Catch, and turn the ABORTED execution into FAILED. The state is left instead: `_eval_state` stops,
    the state's body sees the program is not running, nothing after it runs.
    """
    from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState

    with _evaluating(env):
        try:
            _original(ExecutionState, "_evaluate_with_timeout")(self, env)
        except Exception as exc:
            if env.is_running():
                raise
            LOG.debug("%s ended after its execution stopped: %s", getattr(self, "name", self), type(exc).__name__)


def _retrier_eval_body(self: Any, env: Any) -> None:
    from moto.stepfunctions.parser.asl.component.common.retry.retrier_decl import RetrierDecl

    with _evaluating(env):
        _original(RetrierDecl, "_eval_body")(self, env)


def _wait_interval(self: Any, env: Any, wait_seconds: int) -> None:
    """`WaitFunction._wait_interval`: wait `wait_seconds` (scaled) unless the program stops first."""
    if wait_seconds > 0:
        _scaled_wait(wait_seconds, stop=_env_stopped(env))


def _callback_wait(self: Any, timeout: float | None = None) -> Any:
    """`CallbackEndpoint.wait` (a `.waitForTaskToken` Task's token wait), scaled; `interrupt_all` releases it."""
    _scaled_wait(timeout, event=self._notify_event)
    return self._outcome


def _heartbeat_clear_and_wait(self: Any) -> bool:
    """`HeartbeatEndpoint.clear_and_wait` (a Task's `HeartbeatSeconds`), scaled."""
    with self._mutex:
        if self._next_heartbeat_event.is_set():
            self._next_heartbeat_event.clear()
            return True
    return _scaled_wait(self._heartbeat_seconds, event=self._next_heartbeat_event)


def _activity_start_wait(self: Any, timeout_seconds: float) -> Any:
    """`ActivityTaskStartEndpoint.wait` (an activity Task waiting for a worker), scaled."""
    _scaled_wait(timeout_seconds, event=self._next_activity_task_start_event)
    return self._outcome


def _program_eval(self: Any, env: Any) -> None:
    """`Program.eval`: the state machine's own `TimeoutSeconds`, scaled (upstream: `worker_thread.join(timeout)`)."""
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent
    from moto.stepfunctions.parser.utils import TMP_THREADS

    timeout = self.timeout_seconds.timeout_seconds if self.timeout_seconds else None
    env.next_state_name = self.start_at.start_at_name
    done = threading.Event()

    def evaluate() -> None:
        try:
            EvalComponent.eval(self, env)
        finally:
            done.set()

    worker_thread = threading.Thread(target=evaluate, daemon=True)
    TMP_THREADS.append(worker_thread)
    worker_thread.start()
    if not _scaled_wait(timeout, event=done):
        env.set_timed_out()


def _wait_hooks() -> list[tuple[object, str, object]]:
    """(owner, attribute, replacement) of every interpreter wait; `tests/unit/test_time_scale.py` pins each."""
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
    from moto.stepfunctions.parser.asl.component.program.program import Program
    from moto.stepfunctions.parser.asl.component.state.exec import execute_state
    from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import WaitFunction
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        ActivityTaskStartEndpoint,
        CallbackEndpoint,
        HeartbeatEndpoint,
    )

    return [
        (execute_state, "threading", _ThreadingWithInterpreterEvents("threading")),
        (execute_state.ExecutionState, "_evaluate_with_timeout", _evaluate_with_timeout),
        (retrier_decl, "time", _TimeWithScaledSleep("time")),
        (retrier_decl.RetrierDecl, "_eval_body", _retrier_eval_body),
        (WaitFunction, "_wait_interval", _wait_interval),
        (CallbackEndpoint, "wait", _callback_wait),
        (HeartbeatEndpoint, "clear_and_wait", _heartbeat_clear_and_wait),
        (ActivityTaskStartEndpoint, "wait", _activity_start_wait),
        (Program, "eval", _program_eval),
    ]


def scale_interpreter_waits() -> None:
    """Make every wait of the Step Functions interpreter scaled (`lambda_runtime.time_scale()`) and stop-aware.

    Scaled: Retry backoff sleeps, a Task's `TimeoutSeconds` and `HeartbeatSeconds`, a token or activity wait,
    Wait states, the state machine's `TimeoutSeconds`. Only the local waits shrink; the definition (and the
    values the execution history reports) is untouched. Stop-aware: a Task's timeout wait, a backoff sleep and
    a Wait state return as soon as the execution stops (upstream: only when the time is up, or never for a Task
    waiting without a timeout; see `stop_executions_promptly`). The `.sync` polling interval is not scaled.
    """
    for owner, name, replacement in _wait_hooks():
        _replace(owner, name, replacement)


def unscale_interpreter_waits() -> None:
    for owner, name, _ in _wait_hooks():
        _restore(owner, name)


def _parser_execution_class() -> type:
    from moto.stepfunctions.parser.backend.execution import Execution

    return Execution


def _stop_execution(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
    from moto.stepfunctions.parser.api import ExecutionStatus
    from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

    worker = self.exec_worker
    if worker is not None and worker.env is None:  # started a moment ago: its program is still being parsed
        ready = threading.Event()
        for _ in range(200):
            if worker.env is not None or ready.wait(0.01):
                break
    _original(_parser_execution_class(), "stop")(self, stop_date, error, cause)
    LOG.info("execution %s stopped: %s", getattr(self, "name", "?"), error or "StopExecution")
    env = worker.env if worker is not None else None
    if env is None:
        return
    if isinstance(env.program_state(), ProgramStopped) and self.exec_status == ExecutionStatus.RUNNING:
        self.exec_status = ExecutionStatus.ABORTED
        self.stop_date = stop_date
    for endpoint in list(env.callback_pool_manager._pool.values()):
        endpoint.interrupt_all()  # token waits (and their heartbeats) return now


def stop_executions_promptly() -> None:
    """`StopExecution` ends the execution at once, as in AWS.

    Upstream only marks the program stopped: the execution stays RUNNING (and `stopDate` is null) until its
    thread notices, which a Task waiting for a task token never does (it waits for `SendTaskSuccess`, then
    records TaskSucceeded after the stop); a backoff sleep or Wait state holds it for the rest of its time.
    Now the status is ABORTED (with its stop date) when `StopExecution` returns, every token wait of the execution
    is interrupted, and the waits made stop-aware by `scale_interpreter_waits` return: the execution's thread
    ends with ExecutionAborted and runs nothing after the state it was in.
    """
    _replace(_parser_execution_class(), "stop", _stop_execution)


def unstop_executions() -> None:
    _restore(_parser_execution_class(), "stop")


# --- interpreter logs: one line per failure, an expected stop at INFO ----------------------------------------

#: Error names of an expected stop: a step of a cancelled or expired job (`CancelledError`), which the state machine
#: turns into its `JobStopped` Fail state. Nothing is wrong: the job ended the way it was asked to, and the step's
#: invocation already said so in its one INFO line (`lambda_runtime.run`).
EXPECTED_STOPS = frozenset({"CancelledError", "JobStopped"})
#: A Map's iteration ended by the Map itself: the execution was stopped (a cancel, a deadline) or a sibling failed
#: beyond the tolerated count, which that sibling's own line reports.
ABORTED_ITERATION = "MapIterationAborted"
_LOGGED = "_longhaul_logged"  # set on an exception once it has been logged: each level it crosses logs it again


def _cause_line(details: Any) -> str:
    """The failure's cause, one bounded line: a Lambda error payload is reduced to its `errorMessage`."""
    import json

    spec = next(iter((details or {}).values()), None)
    cause = str((spec or {}).get("cause") or "") if isinstance(spec, dict) else ""
    try:
        parsed = json.loads(cause)
        cause = str(parsed.get("errorMessage", cause)) if isinstance(parsed, dict) else cause
    except ValueError:
        pass
    line = " ".join(cause.split())
    return line if len(line) <= 300 else line[:299] + "…"


def _log_failure_event_exception(self: Any, failure_event_exception: Any) -> None:
    """`EvalComponent._log_failure_event_exception`: one ERROR line per failure; an expected stop only at DEBUG.

    Upstream logs at ERROR, with the failing component's whole `repr` (the state, its Retry/Catch, its payload
    template) and the cause's stack trace, at every level the failure crosses (the item's Fail state, the Map...):
    several kilobytes for a cancelled job.
    """
    if getattr(failure_event_exception, _LOGGED, False):
        return
    setattr(failure_event_exception, _LOGGED, True)
    event = failure_event_exception.failure_event
    error = event.error_name.error_name if event.error_name is not None else "?"
    state = getattr(self, "name", None) or event.state_name or type(self).__name__
    level = logging.DEBUG if error in EXPECTED_STOPS or error.endswith(ABORTED_ITERATION) else logging.ERROR
    LOG.log(level, "execution failed at state %r: %s: %s", state, error, _cause_line(event.event_details))


def _log_exception(self: Any, exception: Exception) -> None:
    """`EvalComponent._log_exception`: one ERROR line, once, without the component's `repr` (DEBUG after a stop)."""
    if getattr(exception, _LOGGED, False):
        return
    with contextlib.suppress(AttributeError):  # an exception class with __slots__ is logged at every level
        setattr(exception, _LOGGED, True)
    state = getattr(self, "name", None) or type(self).__name__
    text = " ".join(str(exception).split())[:300]
    # moto's own aftermath of a stop: a branch still unwinding finds its program stopped
    level = logging.DEBUG if "ProgramStopped" in text else logging.ERROR
    LOG.log(level, "execution failed at state %r: %s: %s", state, type(exception).__name__, text)


def _eval_component_class() -> type:
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    return EvalComponent


def quiet_interpreter_logs() -> None:
    """Log an interpreter failure as one line, once; an expected stop (`EXPECTED_STOPS`) only at DEBUG."""
    _replace(_eval_component_class(), "_log_failure_event_exception", _log_failure_event_exception)
    _replace(_eval_component_class(), "_log_exception", _log_exception)


def loud_interpreter_logs() -> None:
    _restore(_eval_component_class(), "_log_exception")
    _restore(_eval_component_class(), "_log_failure_event_exception")


# --- DynamoDB transactions: back up the items a transaction touches, not its tables ---------------------------

_TRANSACTION = threading.local()  # .active: a `_transact_write_items` runs on this thread


def _dynamodb_models() -> types.ModuleType:
    import moto.dynamodb.models

    return moto.dynamodb.models


class _CopyWithoutTableBackups(types.ModuleType):
    """Stands in for `copy` in `moto.dynamodb.models`: during `_transact_write_items`, a table "copy" is the table.

    Upstream's backup (`copy.deepcopy(self.tables[name])`) becomes the table itself and its rollback
    (`self.tables[name] = backup`) a no-op: `_transact_write_items` restores the touched items instead. Any other
    copy, or a table copied on another thread or outside a transaction, is `copy`'s own.
    """

    @staticmethod
    def deepcopy(value: Any, *args: Any, **kwargs: Any) -> Any:
        from moto.dynamodb.models.table import Table

        if getattr(_TRANSACTION, "active", False) and isinstance(value, Table):
            return value
        return copy.deepcopy(value, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


#: (table, hash key, range key or None, deep copy of the item or None: absent, the item's partition existed)
_ItemBackup = tuple[Any, Any, Any, Any, bool]


def _back_up_items(backend: Any, transact_items: list[dict[str, Any]]) -> tuple[list[_ItemBackup], list[Any]]:
    """The backups of the items the operations address, and each touched stream's (shard, records, length).

    An operation whose table or key moto cannot resolve is skipped: upstream fails it before it writes anything.
    """
    backups: dict[tuple[int, Any, Any], _ItemBackup] = {}
    streams: dict[int, tuple[Any, list[Any], int]] = {}
    for entry in transact_items:
        try:
            op_type, op = next(iter(entry.items()))
            table = backend.get_table(op["TableName"])
            hash_key, range_key = backend.get_keys_value(table, op["Item"] if op_type == "Put" else op["Key"])
        except Exception:  # upstream reports it, and writes nothing for this operation
            continue
        if (id(table), hash_key, range_key) in backups:
            continue  # the same item twice: upstream raises MultipleTransactionsException
        if table.range_key_attr is None:
            partition_existed, item = True, table.items.get(hash_key)
        else:  # items[hash][range]; a plain lookup, not moto's (which creates the partition)
            partition = table.items.get(hash_key)
            partition_existed, item = partition is not None, (partition or {}).get(range_key)
        copied = None if item is None else copy.deepcopy(item)
        backups[(id(table), hash_key, range_key)] = (table, hash_key, range_key, copied, partition_existed)
        shard = table.stream_shard
        if shard is not None:
            streams.setdefault(id(shard), (shard, shard.items, len(shard.items)))
    return list(backups.values()), list(streams.values())


def _restore_items(backups: list[_ItemBackup], streams: list[Any]) -> None:
    for table, hash_key, range_key, item, partition_existed in backups:
        if table.range_key_attr is None:
            if item is None:
                table.items.pop(hash_key, None)
            else:
                table.items[hash_key] = item
            continue
        partition = table.items[hash_key]
        if item is None:
            partition.pop(range_key, None)
        else:
            partition[range_key] = item
        if not partition_existed and not partition:
            del table.items[hash_key]
    for shard, records, length in streams:
        del records[length:]  # the records the transaction added (`StreamShard.add` may have swapped the list)
        shard.items = records


def _transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """`DynamoDBBackend.transact_write_items`, its rollback backup limited to the items the transaction addresses."""
    from moto.dynamodb.models import DynamoDBBackend

    with DYNAMODB_LOCK:  # a transaction is atomic (see `serialize_dynamodb_operations`)
        backups, streams = _back_up_items(self, transact_items)
        was_active = getattr(_TRANSACTION, "active", False)
        _TRANSACTION.active = True
        try:
            _original(DynamoDBBackend, "transact_write_items")(self, transact_items)
        except BaseException:
            _restore_items(backups, streams)
            raise
        finally:
            _TRANSACTION.active = was_active


# One lock for every DynamoDB operation of the in-memory AWS: see `serialize_dynamodb_operations`.
DYNAMODB_LOCK = threading.RLock()
ATOMIC_DYNAMODB_OPERATIONS = ("put_item", "get_item", "update_item", "delete_item", "query", "scan")


def _atomic(name: str) -> Callable[..., Any]:
    def operation(self: Any, *args: Any, **kwargs: Any) -> Any:
        from moto.dynamodb.models import DynamoDBBackend

        with DYNAMODB_LOCK:
            return _original(DynamoDBBackend, name)(self, *args, **kwargs)

    operation.__name__ = name
    return operation


def serialize_dynamodb_operations() -> None:
    """Make each DynamoDB operation atomic, as it is on AWS.

    moto's server answers requests on many threads, and its `update_item` reads the item, applies the expression and
    writes it back with no lock: two concurrent `ADD`s to one item lose one of them, a condition can pass on a state
    another thread is changing, and a query can fail with "dictionary changed size during iteration". Once a function
    serves concurrent invocations (a fan-out's items counting their progress on the job, metering their usage), that
    is lost work. One re-entrant lock around each item operation, query, scan and transaction (`_transact_write_items`
    takes it too) gives the serializable single-item writes DynamoDB guarantees.
    """
    from moto.dynamodb.models import DynamoDBBackend

    for name in ATOMIC_DYNAMODB_OPERATIONS:
        _replace(DynamoDBBackend, name, _atomic(name))


def unserialize_dynamodb_operations() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    for name in ATOMIC_DYNAMODB_OPERATIONS:
        _restore(DynamoDBBackend, name)


def backup_only_touched_items() -> None:
    """Make a DynamoDB transaction's rollback backup proportional to the transaction, not to its tables.

    Upstream deep-copies the whole table once per operation before a `TransactWriteItems` (and puts the copy back
    on failure): with Longhaul's single table, every transaction costs O(table size). Now only the items the
    operations address (TableName + Key, for a Put the key of its Item) are deep-copied (or noted absent), and on
    any failure exactly those are put back (the absent ones deleted), with the stream records the transaction
    added; moto's own code still runs the transaction and raises its errors (TransactionCanceledException with
    its CancellationReasons...). Secondary indexes are computed from the items at query time, and query/scan
    results are sorted by key, so nothing else needs restoring. Differences, all closer to AWS: a rollback keeps
    the table object (references stay valid), also happens on errors upstream leaves half-applied (an operation
    with two actions), and covers a table named by its ARN (upstream backs up tables by name only).
    """
    from moto.dynamodb.models import DynamoDBBackend

    _replace(_dynamodb_models(), "copy", _CopyWithoutTableBackups("copy"))
    _replace(DynamoDBBackend, "transact_write_items", _transact_write_items)


def back_up_whole_tables() -> None:
    from moto.dynamodb.models import DynamoDBBackend

    _restore(DynamoDBBackend, "transact_write_items")
    _restore(_dynamodb_models(), "copy")


# --- Step Functions: a Map run's executions ----------------------------------------------------------------


def _list_executions(self: Any) -> Any:
    from moto.stepfunctions.exceptions import ResourceNotFound
    from moto.stepfunctions.responses import StepFunctionResponse

    if self._get_param("mapRunArn") and not self._get_param("stateMachineArn"):
        raise ResourceNotFound(self._get_param("mapRunArn"))
    return _original(StepFunctionResponse, "list_executions")(self)


def refuse_map_run_listings() -> None:
    """`ListExecutions(mapRunArn=...)` answers `ResourceNotFound` (a 400) instead of a server error.

    moto's interpreter keeps no child executions of a Distributed Map, and its `list_executions` reads only
    `stateMachineArn`: with a map run's ARN it concatenates `None` into a message and the server answers 500, which
    botocore retries and the server prints as a traceback. The cost model asks for a job's map-run children (they
    are billed on AWS); locally it now hears at once that there are none to list and marks its count estimated.
    """
    from moto.stepfunctions.responses import StepFunctionResponse

    _replace(StepFunctionResponse, "list_executions", _list_executions)


def list_map_runs_like_upstream() -> None:
    from moto.stepfunctions.responses import StepFunctionResponse

    _restore(StepFunctionResponse, "list_executions")


# --- ECS: RunTask starts the container's worker, StopTask stops it -------------------------------------------


def _ecs_backend_class() -> type:
    from moto.ecs.models import EC2ContainerServiceBackend

    return EC2ContainerServiceBackend


def _run_task(self: Any, *args: Any, **kwargs: Any) -> Any:
    """`EC2ContainerServiceBackend.run_task`, then each recorded task's worker started (`local.workers.launch`)."""
    from local import workers

    tasks = _original(_ecs_backend_class(), "run_task")(self, *args, **kwargs)
    for task in tasks:
        workers.launch(task, self.describe_task_definition(task.task_definition_arn))
    return tasks


def _stop_task(self: Any, cluster_str: str, task_str: str, reason: str) -> Any:
    """`EC2ContainerServiceBackend.stop_task`, and the task's worker told to stop (SIGTERM, then SIGKILL)."""
    from local import workers

    task = _original(_ecs_backend_class(), "stop_task")(self, cluster_str, task_str, reason)
    workers.stop(task.task_arn)
    return task


def _recase_keys(value: Any, first: Callable[[str], str]) -> Any:
    """`value` with the first letter of every dict key passed through `first`, recursively, in place."""
    if isinstance(value, dict):
        for key in list(value):
            item = _recase_keys(value.pop(key), first)
            value[first(key[:1]) + key[1:]] = item
    elif isinstance(value, list):
        for item in value:
            _recase_keys(item, first)
    return value


def _ecs_normalise_parameters(self: Any, parameters: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    _recase_keys(parameters, str.lower)


def _ecs_normalise_response(self: Any, response: Any, *args: Any, **kwargs: Any) -> None:
    _recase_keys(response, str.upper)


def _ecs_state_class() -> type:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs import (
        StateTaskServiceEcs,
    )

    return StateTaskServiceEcs


def translate_ecs_task_names() -> None:
    """Make the interpreter's ECS integration speak both its languages: ASL's PascalCase, ECS's camelCase.

    Upstream passes a Task's `Parameters` as written (`Cluster`, `TaskDefinition`, `Overrides`...) to boto3, whose
    serializer (parameter validation off) knows only `cluster`, `taskDefinition`...: every `ecs:runTask` Task fails
    with `States.Runtime` "'Cluster'". Its response normalisation is the base no-op too, so reading the result's
    `Tasks[0].ClusterArn` would fail next. Now parameter keys are lowered and response keys raised at their first
    letter, recursively, which is exactly the mapping between the two (`AwsvpcConfiguration` ↔ `awsvpcConfiguration`).
    """
    _replace(_ecs_state_class(), "_normalise_parameters", _ecs_normalise_parameters)
    _replace(_ecs_state_class(), "_normalise_response", _ecs_normalise_response)


def untranslate_ecs_task_names() -> None:
    _restore(_ecs_state_class(), "_normalise_response")
    _restore(_ecs_state_class(), "_normalise_parameters")


def _callback_state_class() -> type:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    return StateTaskServiceCallback


def _callback_eval_execution(self: Any, env: Any) -> None:
    """`StateTaskServiceCallback._eval_execution` (one attempt), with a fresh task token for every retry."""
    context = env.states.context_object.context_object_data
    token = (context.get("Task") or {}).get("Token")
    endpoint = env.callback_pool_manager.get(token) if token else None
    if endpoint is not None and getattr(endpoint, "longhaul_attempted", False):
        endpoint = env.callback_pool_manager.add(env.states.context_object.update_task_token())
    if endpoint is not None:
        endpoint.longhaul_attempted = True
    _original(_callback_state_class(), "_eval_execution")(self, env)


def token_per_attempt() -> None:
    """Give each attempt of a `.waitForTaskToken` Task its own task token, as AWS does.

    Upstream makes the token once per state entry and every Retry attempt waits on the same callback endpoint: once
    a worker has answered `SendTaskFailure`, each retry finds that outcome at once and fails without waiting for its
    own worker (and a timed-out worker could answer for the retry). Now a retry gets a new token and endpoint.
    """
    _replace(_callback_state_class(), "_eval_execution", _callback_eval_execution)


def share_token_across_attempts() -> None:
    _restore(_callback_state_class(), "_eval_execution")


def run_container_tasks_locally() -> None:
    """Make ECS `RunTask` run the task, as `ecs:runTask.waitForTaskToken` expects.

    Upstream records the task (status RUNNING for ever) and runs nothing: the state machine would wait for a token
    nobody holds until its heartbeat bound. Now each container of the task whose name is a worker of this
    repository (`lambdas/workers/<name>`) starts as a subprocess with the task's environment and overrides
    (`local.workers`); its exit marks the task STOPPED, and `StopTask` terminates it.
    """
    _replace(_ecs_backend_class(), "run_task", _run_task)
    _replace(_ecs_backend_class(), "stop_task", _stop_task)


def record_container_tasks_only() -> None:
    _restore(_ecs_backend_class(), "stop_task")
    _restore(_ecs_backend_class(), "run_task")


# --- Step Functions definitions: parsed once, shared by every execution -----------------------------------

#: How many distinct definitions keep their parsed program (a deployment has a handful; `reset()` redeploys the same).
DEFINITION_CACHE_SIZE = 64
_DEFINITIONS: OrderedDict[str, tuple[Any, Any]] = OrderedDict()  # definition text -> (program, parse tree)
_DEFINITIONS_LOCK = threading.Lock()
_PARSING: dict[str, threading.Lock] = {}  # definition text -> held while it is parsed (one parse per text)


def _asl_parser_class() -> type:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return AmazonStateLanguageParser


def evaluation_components(root: Any) -> Iterator[Any]:
    """Every evaluation component (`EvalComponent`) reachable from `root`, a parsed program or part of one, once."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    seen: set[int] = set()
    pending: list[Any] = [root]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, EvalComponent):
            yield value
        if isinstance(value, Component):
            pending.extend(vars(value).values())
        elif isinstance(value, list | tuple | set | frozenset):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())


def _fix_heap_keys(component: Any) -> None:
    """Give every evaluation component of `component` its `heap_key` now, before threads share it.

    Upstream draws a component's key lazily (`EvalComponent.heap_key`: the first reader stores a new uid): two
    executions reading it at once could each draw one and then look up a Retry's attempt counter in
    `env.heap` under the other's key. Drawn once here, every execution reads the same key (the counters
    themselves live in each execution's own `env.heap`).
    """
    for evaluated in evaluation_components(component):
        _ = evaluated.heap_key


def _cached_parse(definition: str) -> tuple[Any, Any]:
    """`AmazonStateLanguageParser.parse`, once per definition text; later calls return the same (program, tree)."""
    with _DEFINITIONS_LOCK:
        found = _DEFINITIONS.get(definition)
        if found is not None:
            _DEFINITIONS.move_to_end(definition)
            return found
        parsing = _PARSING.setdefault(definition, threading.Lock())
    with parsing:  # concurrent first executions of one definition wait for a single parse
        with _DEFINITIONS_LOCK:
            found = _DEFINITIONS.get(definition)
        if found is not None:
            return found
        try:
            program, tree = _original(_asl_parser_class(), "parse")(definition)  # an invalid one raises: not cached
            _fix_heap_keys(program)
            with _DEFINITIONS_LOCK:
                _DEFINITIONS[definition] = (program, tree)
                while len(_DEFINITIONS) > DEFINITION_CACHE_SIZE:
                    _DEFINITIONS.popitem(last=False)
        finally:
            with _DEFINITIONS_LOCK:
                _PARSING.pop(definition, None)
        return program, tree


def forget_parsed_definitions() -> None:
    """Empty the cache of `parse_definitions_once` (tests)."""
    with _DEFINITIONS_LOCK:
        _DEFINITIONS.clear()


def parse_definitions_once() -> None:
    """Parse a state machine definition once and share its program between executions.

    Upstream parses the definition text again (ANTLR lexer, parser, then the preprocessor that builds the program of
    evaluation components) at `CreateStateMachine` and at every `StartExecution`, in the execution's thread: about
    0.35 s of CPU for the document-analysis definition (38 KB), which under a burst of submissions competes for the
    interpreter lock with the API itself. The program is safe to share: its components hold only what the
    definition says; everything an execution changes lives in its `Environment` (states, heap of Retry counters,
    frames, Map run records, callback endpoints), created per execution. The one lazily drawn value, each
    component's `heap_key`, is drawn at parse time (`_fix_heap_keys`). Keyed by the exact text (an updated
    definition is a new text, so it is parsed anew), bounded to `DEFINITION_CACHE_SIZE` texts.
    """
    _replace(_asl_parser_class(), "parse", staticmethod(_cached_parse))


def parse_definitions_every_time() -> None:
    _restore(_asl_parser_class(), "parse")
    forget_parsed_definitions()


# --- moto server: which backend serves a host, worked out once per host --------------------------------------

_BACKEND_FOR_HOST: dict[tuple[int, str | None], Any] = {}  # (id of the dispatcher, host) -> backend name or None


def _dispatcher_class() -> type:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    return DomainDispatcherApplication


def _backend_for_host(self: Any, host: str | None) -> Any:
    """`DomainDispatcherApplication.get_backend_for_host`, memoized per server and host."""
    key = (id(self), host)
    try:
        return _BACKEND_FOR_HOST[key]
    except KeyError:
        backend = _original(_dispatcher_class(), "get_backend_for_host")(self, host)
        _BACKEND_FOR_HOST[key] = backend
        return backend


def resolve_backends_once() -> None:
    """Make the moto server find the backend of a request's host once per host, not on every request.

    Upstream's `get_application` runs, for every request and under the server's one lock, `get_backend_for_host`:
    a listing of moto's package directory with an `isdir` per entry (`backends.list_of_moto_modules`), then a match
    against hundreds of URL patterns. Every AWS call of the local platform (the handlers', the interpreter's, the
    front door's) passes that lock: in a 50-client burst of submissions nearly every busy thread was waiting there.
    The answer depends only on the host and on moto's installed modules and URL patterns, which do not change while
    the server runs, so it is memoized per server and host.
    """
    _replace(_dispatcher_class(), "get_backend_for_host", _backend_for_host)


def resolve_backends_every_time() -> None:
    _restore(_dispatcher_class(), "get_backend_for_host")
    _BACKEND_FOR_HOST.clear()


# --- Step Functions paths and clients: parsed once, created once ---------------------------------------------

#: JSONPath texts kept parsed (a deployment's definitions hold a few hundred distinct paths).
JSON_PATH_CACHE_SIZE = 4096
_JSON_PATH_MODULES = (
    "moto.stepfunctions.parser.asl.utils.json_path",  # InputPath, Parameters' "x.$", OutputPath, ItemsPath, Choice
    "moto.stepfunctions.parser.asl.component.common.path.result_path",  # ResultPath
)


def _module(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def parse_json_paths_once() -> None:
    """Parse each JSONPath text once, not at every evaluation.

    Upstream calls `jsonpath_ng.parse` (and its `ext` variant) every time a state reads or writes a path: each call
    builds a new PLY parser (`yacc`), about 1 ms of CPU, several times per state of every execution: 6% of the
    platform's CPU in a burst of submissions. A parsed path is a tree of immutable nodes (`find`,
    `update_or_create` build new values, never change the tree), so one parse per text serves every execution.
    """
    for name in _JSON_PATH_MODULES:
        module = _module(name)
        _replace(module, "parse", functools.lru_cache(maxsize=JSON_PATH_CACHE_SIZE)(_original(module, "parse")))


def parse_json_paths_every_time() -> None:
    for name in _JSON_PATH_MODULES:
        _restore(_module(name), "parse")


_BOTO_CLIENT_MODULE = "moto.stepfunctions.parser.asl.utils.boto_client"
_BOTO_CLIENT_USERS = (
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_dynamodb",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_events",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sqs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_unsupported",
)
#: Connections one shared client keeps per host: a Map's items and concurrent executions call at once.
BOTO_CLIENT_POOL = 64
_BOTO_CLIENTS: dict[tuple[str, str, bool, int], Any] = {}
_BOTO_CLIENTS_LOCK = threading.Lock()


def _shared_boto_client(region: str, service: str, state_credentials: Any = None) -> Any:
    """Upstream's `boto_client_for` (same credentials, endpoint, timeouts, no retries), one client per region,
    service and endpoint, with a connection pool for concurrent callers."""
    import boto3
    from botocore.config import Config
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds

    intercepting = bool(botocore_stubber.enabled)
    key = (region, service, intercepting, int(moto_server_port()))
    with _BOTO_CLIENTS_LOCK:
        client = _BOTO_CLIENTS.get(key)
        if client is None:
            client = boto3.client(
                aws_access_key_id="ak",
                region_name=region,
                service_name=service,
                aws_secret_access_key="sk",
                config=Config(
                    parameter_validation=False,
                    retries={"max_attempts": 0, "total_max_attempts": 1},
                    connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                    read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                    max_pool_connections=BOTO_CLIENT_POOL,
                ),
                **({} if intercepting else {"endpoint_url": f"http://localhost:{moto_server_port()}"}),
            )
            _BOTO_CLIENTS[key] = client
    return client


def share_interpreter_clients() -> None:
    """Create the interpreter's AWS client for a region and service once, not for every Task.

    Upstream's `boto_client_for` builds a new boto3 client (a session, the service model, an endpoint resolver) for
    every Lambda invocation, SDK integration, item reader and result writer: about 5 ms of CPU per Task, 5% of the
    platform's CPU in a burst of submissions. botocore clients are thread-safe; each Task's call is stateless (the
    interpreter passes no per-execution credentials here), so one client per region, service and endpoint serves
    them all.
    """
    for name in _BOTO_CLIENT_USERS:
        _replace(_module(name), "boto_client_for", _shared_boto_client)


def create_interpreter_clients_every_time() -> None:
    for name in _BOTO_CLIENT_USERS:
        _restore(_module(name), "boto_client_for")
    with _BOTO_CLIENTS_LOCK:
        _BOTO_CLIENTS.clear()


# --- DynamoDB: an update expression's text parsed once -------------------------------------------------------

#: Update expression texts kept parsed (the handlers use a few dozen).
UPDATE_EXPRESSION_CACHE_SIZE = 1024


def _update_expression_parser_class() -> type:
    from moto.dynamodb.parsing import expressions

    parser: type = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 (not visible to mypy in moto)
    return parser


def _validators() -> types.ModuleType:
    from moto.dynamodb.parsing import validators

    return validators


@functools.lru_cache(maxsize=UPDATE_EXPRESSION_CACHE_SIZE)
def _parsed_update_expression(expression: str) -> Any:
    tree = _original(_update_expression_parser_class(), "make")(expression)
    _validators().ActionCountValidator().traverse(copy.deepcopy(tree))  # raises TooManyClauses: then not cached
    return tree


def _make_update_expression(cls: type, expression_str: str) -> Any:
    return _parsed_update_expression(expression_str)


def _processors_but_action_counts(self: Any) -> list[Any]:
    processors = _original(_validators().UpdateExpressionValidator, "get_ast_processors")(self)
    return [p for p in processors if not isinstance(p, _validators().ActionCountValidator)]


def parse_update_expressions_once() -> None:
    """Tokenize and parse an UpdateExpression text once, not two or three times per request.

    Upstream parses the text in the request handler (to list the placeholders it uses) and again in the backend, per
    UpdateItem and per Update of a transaction: 12% of the CPU of a submission's DynamoDB calls. The tree is only
    read (`find_clauses`) or deep-copied first (`Validator.__init__` copies it before it resolves names and values
    into it), so one tree per text serves every request; a text that does not parse raises every time.

    The check that a text has at most one SET, ADD and REMOVE clause (`ActionCountValidator`) depends on the text
    alone, and upstream runs it on every update in quadratic time (each nested clause node lists all the clauses
    below it: 10% of the CPU of a submission's updates). It runs once, when the text is parsed; a text that fails it
    is refused with the same error, before the item is read rather than after.
    """
    _replace(_update_expression_parser_class(), "make", classmethod(_make_update_expression))
    _replace(_validators().UpdateExpressionValidator, "get_ast_processors", _processors_but_action_counts)


def parse_update_expressions_every_time() -> None:
    _restore(_validators().UpdateExpressionValidator, "get_ast_processors")
    _restore(_update_expression_parser_class(), "make")
    _parsed_update_expression.cache_clear()


# --- SQS: a receive checks each message's retention against its queue's setting ----------------------------


def _sqs_backend_class() -> type:
    from moto.sqs.models import SQSBackend

    return SQSBackend


def _within_retention(self: Any, queue_name: str, message: Any) -> bool:
    from moto.core.utils import unix_time

    retention = int(self.get_queue(queue_name).message_retention_period)
    return bool(retention + message.sent_timestamp / 1000 > unix_time())


def check_retention_directly() -> None:
    """Read a queue's retention period, not all its attributes, for each message a receive returns.

    Upstream's `is_message_valid_based_on_retention_period` calls `get_queue_attributes`, which computes every
    attribute of the queue, including three counts that walk all its messages: a receive of n messages from a queue
    of N costs n x 3N message checks. With a backlog of a few hundred queued jobs in an intake queue, each dispatcher
    round took seconds of CPU. The check itself is unchanged (sent time + retention period, against now).
    """
    _replace(_sqs_backend_class(), "is_message_valid_based_on_retention_period", _within_retention)


def check_retention_through_attributes() -> None:
    _restore(_sqs_backend_class(), "is_message_valid_based_on_retention_period")


def apply() -> None:
    """Install every patch (idempotent)."""
    enable_execution()
    route_state_machines_to_interpreter()
    name_executions_like_aws()
    run_lambdas_in_process()
    scale_interpreter_waits()
    stop_executions_promptly()
    quiet_interpreter_logs()
    backup_only_touched_items()
    serialize_dynamodb_operations()
    refuse_map_run_listings()
    translate_ecs_task_names()
    token_per_attempt()
    run_container_tasks_locally()
    parse_definitions_once()
    resolve_backends_once()
    parse_json_paths_once()
    share_interpreter_clients()
    check_retention_directly()
    parse_update_expressions_once()


def revert() -> None:
    """Restore moto's own behaviour (idempotent)."""
    parse_update_expressions_every_time()
    check_retention_through_attributes()
    create_interpreter_clients_every_time()
    parse_json_paths_every_time()
    resolve_backends_every_time()
    parse_definitions_every_time()
    record_container_tasks_only()
    share_token_across_attempts()
    untranslate_ecs_task_names()
    list_map_runs_like_upstream()
    unserialize_dynamodb_operations()
    back_up_whole_tables()
    loud_interpreter_logs()
    unstop_executions()
    unscale_interpreter_waits()
    stop_running_lambdas_in_process()
    unname_executions()
    unroute_state_machines()
    disable_execution()


def is_applied() -> bool:
    return bool(_ORIGINALS)
