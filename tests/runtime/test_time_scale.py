"""Time scaling of the local Step Functions interpreter (`moto_patches.scale_interpreter_waits`).

Pins: each upstream function a hook wraps or replaces must still exist with the same signature and the code the
hook relies on (a wrapped function: the exact wait line; a replaced function: its whole source, by digest). When
one fails, moto changed: re-check that hook in `local/moto_patches/interpreter.py`, then update the pin.
Behaviour: hand-written ASL against moto in decorator mode, functions run in-process; no CDK, no server.
"""

from __future__ import annotations

import inspect
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import lambda_runtime, moto_patches
from local.deploy import wait_until
from tests.runtime.upstream import digest
from tests.unit.aws_env import REGION, offline_credentials

ROLE_ARN = "arn:aws:iam::123456789012:role/sfn"
SCALE = 0.01
RELEASE = threading.Event()
CALLS: list[Any] = []


# --- pins ---------------------------------------------------------------------------------------------------


def _signature(fn: Any) -> str:
    """Parameter names and defaults (annotations are strings or types, depending on how moto was imported)."""
    parameters = inspect.signature(fn).parameters.values()
    return "(" + ", ".join(p.name + ("" if p.default is p.empty else f"={p.default!r}") for p in parameters) + ")"


#: (owner's name, attribute) -> (signature, what the hook relies on: source lines, or the source digest)
PINS: dict[tuple[str, str], tuple[str | None, tuple[str, ...] | str]] = {
    ("execute_state", "threading"): (None, ()),
    ("ExecutionState", "_evaluate_with_timeout"): (
        "(self, env)",
        ("terminated_event = threading.Event()", "finished_on_time: bool = terminated_event.wait(timeout_seconds)"),
    ),
    ("retrier_decl", "time"): (None, ()),
    ("RetrierDecl", "_eval_body"): ("(self, env)", ("time.sleep(interval_seconds)",)),
    ("WaitFunction", "_wait_interval"): ("(self, env, wait_seconds)", "2baecc23124bf46c"),
    ("CallbackEndpoint", "wait"): ("(self, timeout=None)", "07677ef59b8d34ef"),
    ("HeartbeatEndpoint", "clear_and_wait"): ("(self)", "dd42ecf09a1cda02"),
    ("CallbackEndpoint", "notify_heartbeat"): ("(self)", ("if not self._heartbeat_endpoint:", "return False")),
    ("ActivityTaskStartEndpoint", "wait"): ("(self, timeout_seconds)", "6b00a1a28af5abad"),
    ("Program", "eval"): ("(self, env)", "b8bfa1cb68d308ac"),
}


def _owner_name(owner: object) -> str:
    return str(getattr(owner, "__name__", owner)).rsplit(".", 1)[-1]


def test_every_wait_hook_is_pinned() -> None:
    assert {(_owner_name(owner), name) for owner, name, _ in moto_patches._wait_hooks()} == set(PINS)


@pytest.mark.parametrize("hook", moto_patches._wait_hooks(), ids=lambda h: f"{_owner_name(h[0])}.{h[1]}")
def test_upstream_wait_is_where_the_hook_expects_it(hook: tuple[object, str, object]) -> None:
    owner, name, _ = hook
    upstream = moto_patches._original(owner, name)
    signature, relies_on = PINS[(_owner_name(owner), name)]
    if name == "threading":
        assert upstream is threading
    elif name == "time":
        assert upstream is time
    else:
        assert _signature(upstream) == signature
        if isinstance(relies_on, str):
            assert digest(upstream) == relies_on, f"{_owner_name(owner)}.{name} changed upstream: re-check the hook"
        else:
            source = inspect.getsource(upstream)
            for line in relies_on:
                assert line in source, f"{_owner_name(owner)}.{name} no longer has {line!r}: re-check the hook"


def test_a_heartbeat_before_its_task_waits_is_accepted_with_the_patch_and_refused_without() -> None:
    from moto.stepfunctions.parser.asl.eval.callback.callback import CallbackEndpoint

    endpoint = CallbackEndpoint("token")  # registered, its Task's heartbeat wait not begun
    assert moto_patches._original(CallbackEndpoint, "notify_heartbeat")(endpoint) is False  # upstream: InvalidToken
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    try:
        assert endpoint.notify_heartbeat() is True
        heartbeat = endpoint.setup_heartbeat_endpoint(heartbeat_seconds=60)
        assert endpoint.notify_heartbeat() is True and heartbeat._next_heartbeat_event.is_set()
    finally:
        if not was_applied:
            moto_patches.revert()


# --- the scale itself -------------------------------------------------------------------------------------------


def test_time_scale_rejects_non_positive_values() -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            lambda_runtime.set_time_scale(bad)
    assert lambda_runtime.time_scale() == 1.0


def test_scaled_wait_follows_a_scale_change_while_waiting() -> None:
    lambda_runtime.set_time_scale(1.0)
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(lambda_runtime.scaled_wait(3600)))
    started = time.monotonic()
    waiter.start()
    try:
        lambda_runtime.set_time_scale(0.0001)  # 3600 s now last 0.36 s
        wait_until(lambda: result or None, timeout=5, what="the scaled wait")
    finally:
        lambda_runtime.set_time_scale(1.0)
    assert result == [False]
    assert time.monotonic() - started < 3


def test_a_real_time_floor_holds_a_scaled_wait_but_not_an_event_or_a_shorter_wait() -> None:
    lambda_runtime.set_time_scale(0.001)
    event = threading.Event()
    try:
        started = time.monotonic()
        assert lambda_runtime.scaled_wait(60, min_real=0.5) is False  # 0.06 s scaled, held to 0.5 s
        assert 0.5 <= time.monotonic() - started < 2
        started = time.monotonic()
        assert lambda_runtime.scaled_wait(0.1, min_real=5) is False  # never longer than unscaled
        assert time.monotonic() - started < 1
        threading.Timer(0.2, event.set).start()
        started = time.monotonic()
        assert lambda_runtime.scaled_wait(60, event=event, min_real=5) is True
        assert time.monotonic() - started < 2
    finally:
        lambda_runtime.set_time_scale(1.0)


def test_scaled_wait_returns_when_its_event_is_set_or_it_is_stopped() -> None:
    event = threading.Event()
    event.set()
    assert lambda_runtime.scaled_wait(3600, event=event) is True
    assert lambda_runtime.scaled_wait(3600, stop=lambda: True) is False


# --- behaviour ------------------------------------------------------------------------------------------------


def hangs(event: Any, context: Any) -> dict[str, Any]:
    """Blocks until the test ends (the Task's timeout must fire first)."""
    CALLS.append(event)
    RELEASE.wait(30)
    return {}


def fails_first(event: Any, context: Any) -> dict[str, Any]:
    CALLS.append(event)
    if len(CALLS) == 1:
        raise TransientTrouble("first call fails")
    return {"attempts": len(CALLS)}


class TransientTrouble(Exception):
    pass


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)
    CALLS.clear()
    RELEASE.clear()
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    lambda_runtime.set_time_scale(SCALE)
    try:
        with mock_aws(config=moto_patches.RUNTIME_CONFIG):
            yield
    finally:
        RELEASE.set()
        lambda_runtime.set_time_scale(1.0)
        if not was_applied:
            moto_patches.revert()


def _function(handler: Any) -> str:
    role = boto3.client("iam", region_name=REGION).create_role(RoleName=handler.__name__, AssumeRolePolicyDocument="{}")
    arn: str = boto3.client("lambda", region_name=REGION).create_function(
        FunctionName=handler.__name__,
        Runtime="python3.12",
        Role=role["Role"]["Arn"],
        Handler=f"{__name__}.{handler.__name__}",
        Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        Timeout=900,
    )["FunctionArn"]
    return arn


def _run(definition: dict[str, Any], *, timeout: float = 5) -> tuple[dict[str, Any], float]:
    """Create, start and wait for a state machine; returns (describe_execution, seconds it took)."""
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(name="scaled", definition=json.dumps(definition), roleArn=ROLE_ARN)
    started = time.monotonic()
    arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], input="{}")["executionArn"]

    def finished() -> dict[str, Any] | None:
        described: dict[str, Any] = sfn.describe_execution(executionArn=arn)
        return None if described["status"] == "RUNNING" else described

    described = wait_until(finished, timeout=timeout, what=arn)
    return described, time.monotonic() - started


@pytest.mark.usefixtures("scaled")
def test_task_timeout_of_60_s_fires_at_the_real_time_floor_at_scale_0_01() -> None:
    # 60 s x 0.01 = 0.6 s, below the floor: the Task is timed out after TASK_TIMEOUT_FLOOR_SECONDS of real time.
    definition = {
        "StartAt": "Slow",
        "States": {"Slow": {"Type": "Task", "Resource": _function(hangs), "TimeoutSeconds": 60, "End": True}},
    }

    described, took = _run(definition)

    assert described["status"] == "FAILED"
    assert described["error"] == "States.Timeout"
    assert lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS <= took < lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS + 3
    history = boto3.client("stepfunctions", region_name=REGION).get_execution_history(
        executionArn=described["executionArn"]
    )["events"]
    scheduled = next(e for e in history if e["type"] == "LambdaFunctionScheduled")
    assert scheduled["lambdaFunctionScheduledEventDetails"]["timeoutInSeconds"] == 60  # the definition's value


@pytest.mark.usefixtures("scaled")
def test_retry_interval_of_20_s_passes_in_a_fraction_of_a_second_at_scale_0_01() -> None:
    definition = {
        "StartAt": "Flaky",
        "States": {
            "Flaky": {
                "Type": "Task",
                "Resource": _function(fails_first),
                "Retry": [{"ErrorEquals": ["TransientTrouble"], "IntervalSeconds": 20, "MaxAttempts": 2}],
                "End": True,
            }
        },
    }

    described, took = _run(definition)

    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"]) == {"attempts": 2}
    assert 0.2 <= took < 5


@pytest.mark.usefixtures("scaled")
def test_wait_state_of_100_s_passes_in_about_a_second_at_scale_0_01() -> None:
    definition = {"StartAt": "Nap", "States": {"Nap": {"Type": "Wait", "Seconds": 100, "End": True}}}

    described, took = _run(definition)

    assert described["status"] == "SUCCEEDED"
    assert 1 <= took < 5


@pytest.mark.usefixtures("scaled")
def test_heartbeat_of_60_s_times_out_in_under_a_second_at_scale_0_01() -> None:
    queue = boto3.client("sqs", region_name=REGION).create_queue(QueueName="tokens")["QueueUrl"]
    definition = {
        "StartAt": "Await",
        "States": {
            "Await": {
                "Type": "Task",
                "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
                "Parameters": {"QueueUrl": queue, "MessageBody.$": "$$.Task.Token"},
                "HeartbeatSeconds": 60,
                "TimeoutSeconds": 6000,
                "End": True,
            }
        },
    }

    described, took = _run(definition)

    assert described["status"] == "FAILED"
    # moto names every Task TimeoutError States.Timeout (AWS: States.HeartbeatTimeout); the Task's own timeout
    # (6000 s, 60 s scaled) is far off, so this is the heartbeat's.
    assert described["error"] in {"States.HeartbeatTimeout", "States.Timeout"}
    assert 0.5 <= took < 5


@pytest.mark.usefixtures("scaled")
def test_state_machine_timeout_is_scaled_too() -> None:
    definition = {
        "TimeoutSeconds": 50,
        "StartAt": "Nap",
        "States": {"Nap": {"Type": "Wait", "Seconds": 3600, "End": True}},
    }

    described, took = _run(definition)

    assert described["status"] == "TIMED_OUT"
    assert 0.5 <= took < 5


# --- python -m local ---------------------------------------------------------------------------------------------


def test_longhaul_time_scale_is_parsed_strictly() -> None:
    from local.__main__ import parse_time_scale

    assert parse_time_scale("") == 1.0
    assert parse_time_scale("0.01") == 0.01
    for bad in ("0", "-1", "abc", "inf", "nan"):
        with pytest.raises(ValueError):
            parse_time_scale(bad)


def test_banner_shows_the_time_scale_only_when_it_is_not_1() -> None:
    from pathlib import Path

    from local.__main__ import banner
    from local.deploy import Deployment
    from local.platform import LocalPlatform

    deployment = Deployment("Longhaul-dev", "id", {}, {}, "table", "bucket", {}, {})
    platform = LocalPlatform(Path("."), "http://127.0.0.1:1", "http://127.0.0.1:2", [deployment], [])
    assert "Time scale" not in banner(platform)
    lambda_runtime.set_time_scale(0.01)
    try:
        assert "Time scale       0.01" in banner(platform)
    finally:
        lambda_runtime.set_time_scale(1.0)


def test_a_wakeable_wait_notices_a_stop_when_woken_not_by_polling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lambda_runtime, "WAKEABLE_SLICE_SECONDS", 60.0)
    stopped = threading.Event()
    results: list[bool] = []
    waiters = [
        threading.Thread(target=lambda: results.append(lambda_runtime.scaled_wait(3600, stop=stopped.is_set))),
        threading.Thread(
            target=lambda: results.append(
                lambda_runtime.scaled_wait(3600, event=lambda_runtime.Waker(), stop=stopped.is_set)
            )
        ),
    ]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.3)
    stopped.set()
    time.sleep(0.3)
    assert results == []  # nothing polls the stop condition: each waits for its slice of 60 s
    started = time.monotonic()
    lambda_runtime.wake_waits()  # what a StopExecution, an execution's timeout or a scale change does
    for waiter in waiters:
        waiter.join(10)
    assert results == [False, False]
    assert time.monotonic() - started < 5


def test_a_waker_that_is_set_ends_its_wait_and_a_nudge_alone_does_not() -> None:
    waker = lambda_runtime.Waker()
    threading.Timer(0.2, lambda_runtime.wake_waits).start()
    threading.Timer(0.5, waker.set).start()
    started = time.monotonic()
    assert lambda_runtime.scaled_wait(3600, event=waker) is True
    assert 0.4 < time.monotonic() - started < 5
