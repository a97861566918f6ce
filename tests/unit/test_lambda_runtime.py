"""The in-process Lambda runtime: AWS-shaped errors, per-invocation environments, context, middlewares."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import lambda_runtime, moto_patches
from local.deploy import wait_until

BARRIER = threading.Barrier(2, timeout=10)


class QuotaExceeded(Exception):
    pass


def failing(event: Any, context: Any) -> None:
    raise QuotaExceeded(f"tenant {event['tenant']} is over budget")


def table_after_rendezvous(event: Any, context: Any) -> dict[str, Any]:
    """Both invocations are inside their handler at the same time before reading their environment."""
    from longhaul.core.settings import environ, get_settings

    BARRIER.wait()
    return {"env": environ().get("LONGHAUL_TABLE"), "settings": get_settings().table_name}


def describe_context(event: Any, context: Any) -> dict[str, Any]:
    return {
        "name": context.function_name,
        "arn": context.invoked_function_arn,
        "memory": context.memory_limit_in_mb,
        "remaining": context.get_remaining_time_in_millis(),
        "request_id": context.aws_request_id,
        "event": event,
    }


@dataclass
class FakeFunction:
    """Duck-types the attributes of moto's LambdaFunction that the runtime reads."""

    handler: str
    function_name: str = "fn"
    environment_vars: dict[str, str] = field(default_factory=dict)
    timeout: int = 30
    memory_size: int = 256
    version: str = "$LATEST"
    reserved_concurrency: int | None = None

    @property
    def function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"


def _fn(handler: Callable[..., Any], **kwargs: Any) -> FakeFunction:
    return FakeFunction(handler=f"{__name__}.{handler.__name__}", **kwargs)


def test_handler_exception_becomes_aws_error_payload() -> None:
    payload, errored = lambda_runtime.run(_fn(failing), {"tenant": "alpha"})

    assert errored
    error = json.loads(payload)
    assert error["errorType"] == "QuotaExceeded"
    assert error["errorMessage"] == "tenant alpha is over budget"
    assert any("in failing" in line for line in error["stackTrace"])


def test_concurrent_invocations_each_see_their_own_environment() -> None:
    functions = [
        _fn(
            table_after_rendezvous,
            function_name=name,
            environment_vars={"LONGHAUL_TABLE": name, "LONGHAUL_BUCKET": "b"},
        )
        for name in ("table-a", "table-b")
    ]
    before = dict(os.environ)

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda f: lambda_runtime.run(f, {}), functions))

    assert [json.loads(payload) for payload, _ in results] == [
        {"env": "table-a", "settings": "table-a"},
        {"env": "table-b", "settings": "table-b"},
    ]
    assert dict(os.environ) == before


def test_context_carries_lambda_attributes() -> None:
    payload, errored = lambda_runtime.run(
        _fn(describe_context, function_name="ctx", timeout=5, memory_size=512), {"a": 1}
    )

    context = json.loads(payload)
    assert not errored
    assert context["name"] == "ctx"
    assert context["arn"].endswith(":function:ctx")
    assert context["memory"] == 512
    assert 0 < context["remaining"] <= 5000
    assert context["request_id"]
    assert context["event"] == {"a": 1}


def test_middleware_sees_the_invocation_and_can_inject_a_fault() -> None:
    seen: list[tuple[str, str, Any]] = []

    def throttle(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        seen.append((invocation.function_name, invocation.handler, invocation.event))
        raise TimeoutError("injected")

    with lambda_runtime.middleware(throttle):
        payload, errored = lambda_runtime.run(_fn(describe_context, function_name="victim"), {"x": 1})
    after, after_errored = lambda_runtime.run(_fn(describe_context), {})

    assert errored and json.loads(payload)["errorType"] == "TimeoutError"
    assert seen == [("victim", f"{__name__}.describe_context", {"x": 1})]
    assert not after_errored and json.loads(after)["name"] == "fn"


def test_environment_overrides_reach_every_function() -> None:
    lambda_runtime.configure(environment_overrides={"LONGHAUL_MODEL_PROVIDER": "offline"})
    try:
        env = lambda_runtime.function_environment(_fn(failing, environment_vars={"LONGHAUL_TABLE": "t"}))
    finally:
        lambda_runtime.configure(environment_overrides={})

    assert env["LONGHAUL_TABLE"] == "t"
    assert env["LONGHAUL_MODEL_PROVIDER"] == "offline"
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == "fn"


@pytest.fixture
def moto_lambda(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        client = boto3.client("lambda", region_name="us-east-1")
        iam = boto3.client("iam", region_name="us-east-1")
        role = iam.create_role(RoleName="r", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        client.create_function(
            FunctionName="failing",
            Runtime="python3.12",
            Role=role,
            Handler=f"{__name__}.failing",
            Code={"ZipFile": b"PK\x05\x06" + b"\x00" * 18},
        )
        yield client
    if not was_applied:
        moto_patches.revert()


def test_moto_invoke_reports_unhandled_function_error(moto_lambda: Any) -> None:
    response = moto_lambda.invoke(FunctionName="failing", Payload=json.dumps({"tenant": "beta"}).encode())

    assert response["FunctionError"] == "Unhandled"
    assert json.loads(response["Payload"].read())["errorType"] == "QuotaExceeded"


RENDEZVOUS = threading.Barrier(2, timeout=10)


def meet_another_invocation(event: Any, context: Any) -> str:
    """Returns only when a second invocation is inside its handler at the same time (else the barrier breaks)."""
    RENDEZVOUS.wait()
    return str(context.aws_request_id)


def test_invocations_of_one_function_run_concurrently() -> None:
    # Given one function, when two invocations of it are made at once, both are inside the handler together
    RENDEZVOUS.reset()
    fn = _fn(meet_another_invocation, function_name="shared-sandboxes")

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: lambda_runtime.run(fn, {}), range(2)))

    assert [errored for _, errored in results] == [False, False]  # a broken barrier would be a function error
    assert len({payload for payload, _ in results}) == 2


@dataclass
class Gate:
    """Counts the invocations inside `gated` and holds them until opened."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    opened: threading.Event = field(default_factory=threading.Event)
    inside: int = 0
    peak: int = 0
    entered: list[int] = field(default_factory=list)


GATE = Gate()


def gated(event: Any, context: Any) -> int:
    with GATE.lock:
        GATE.inside += 1
        GATE.peak = max(GATE.peak, GATE.inside)
        GATE.entered.append(event["n"])
    GATE.opened.wait(10)
    with GATE.lock:
        GATE.inside -= 1
    return int(event["n"])


@pytest.mark.parametrize(("reserved", "bound"), [(2, 2), (None, lambda_runtime.DEFAULT_CONCURRENCY)])
def test_concurrent_invocations_of_one_function_are_bounded(reserved: int | None, bound: int) -> None:
    # Given a function with reserved concurrency (or the default bound), when more invocations than that arrive
    global GATE
    GATE = Gate()
    fn = _fn(gated, function_name=f"bounded-{reserved}", reserved_concurrency=reserved)
    total = bound + 4

    with ThreadPoolExecutor(max_workers=total) as pool:
        futures = [pool.submit(lambda_runtime.run, fn, {"n": n}) for n in range(total)]
        wait_until(lambda: GATE.inside == bound or None, timeout=10, interval=0.01, what="the first invocations")
        GATE.opened.wait(0.2)  # room for any invocation beyond the bound to (wrongly) enter
        inside_while_held = GATE.inside
        GATE.opened.set()
        results = [future.result(timeout=10) for future in futures]

    # Then exactly `bound` run at once; the others wait for a slot and still run
    assert inside_while_held == bound
    assert GATE.peak == bound
    assert sorted(json.loads(payload) for payload, _ in results) == list(range(total))


def test_default_concurrency_is_configurable_and_validated() -> None:
    lambda_runtime.configure(default_concurrency=3)
    try:
        assert lambda_runtime.concurrency_of(_fn(gated)) == 3
        assert lambda_runtime.concurrency_of(_fn(gated, reserved_concurrency=5)) == 5
    finally:
        lambda_runtime.configure(default_concurrency=lambda_runtime.DEFAULT_CONCURRENCY)
    with pytest.raises(ValueError):
        lambda_runtime.configure(default_concurrency=0)


# --- error types ----------------------------------------------------------------------------------------------


class OutOfQuota(Exception):
    error_type = "Custom.OutOfQuota"


class Abandon(BaseException):
    """A BaseException without `error_type`: not a function error, it propagates."""


def crashes(event: Any, context: Any) -> None:
    from longhaul.core.faults import CrashFault

    raise CrashFault("died after its side effects")


def declares_error_type(event: Any, context: Any) -> None:
    raise OutOfQuota("over")


def abandons(event: Any, context: Any) -> None:
    raise Abandon()


def test_crash_fault_becomes_a_runtime_exit_error_instead_of_escaping() -> None:
    payload, errored = lambda_runtime.run(_fn(crashes), {})

    assert errored
    assert json.loads(payload)["errorType"] == "Runtime.ExitError"
    assert json.loads(payload)["errorMessage"] == "died after its side effects"


def test_an_exception_declaring_error_type_is_reported_with_it() -> None:
    payload, errored = lambda_runtime.run(_fn(declares_error_type), {})

    assert errored and json.loads(payload)["errorType"] == "Custom.OutOfQuota"


def test_other_base_exceptions_still_propagate() -> None:
    with pytest.raises(Abandon):
        lambda_runtime.run(_fn(abandons), {})


# --- runtime faults (the built-in middleware) -------------------------------------------------------------------

DELIVERIES: list[tuple[Any, str]] = []


def records_delivery(event: Any, context: Any) -> dict[str, Any]:
    DELIVERIES.append((event, context.aws_request_id))
    return {"delivery": len(DELIVERIES)}


def _step_event(step: str, item: int | None = None) -> dict[str, Any]:
    return {"step": step, "item": item, "attempt": 0, "input": {"job_id": "job_1"}}


@pytest.fixture
def faults_spec() -> Iterator[Callable[[str], None]]:
    from longhaul.core import faults

    DELIVERIES.clear()
    remove = lambda_runtime.install_runtime_faults()
    yield lambda spec: faults.install(faults.FaultInjector(spec))
    remove()
    faults.install(faults.FaultInjector())
    lambda_runtime.set_time_scale(1.0)


def test_install_runtime_faults_is_idempotent_and_outermost(faults_spec: Callable[[str], None]) -> None:
    def other(invocation: lambda_runtime.Invocation, call_next: Callable[[], Any]) -> Any:
        return call_next()

    with lambda_runtime.middleware(other):
        remove = lambda_runtime.install_runtime_faults()
        assert lambda_runtime._RUNTIME.middlewares == [lambda_runtime.runtime_faults, other]
    remove()
    assert lambda_runtime.runtime_faults not in lambda_runtime._RUNTIME.middlewares


def test_duplicate_delivers_the_event_twice_and_returns_the_second_result(
    faults_spec: Callable[[str], None],
) -> None:
    faults_spec("parse_documents=duplicatex1")
    fn = _fn(records_delivery)

    payload, errored = lambda_runtime.run(fn, _step_event("parse_documents"))
    again, _ = lambda_runtime.run(fn, _step_event("parse_documents"))

    assert not errored and json.loads(payload) == {"delivery": 2}
    assert [event for event, _ in DELIVERIES[:2]] == [_step_event("parse_documents")] * 2
    assert DELIVERIES[0][1] != DELIVERIES[1][1]  # each delivery has its own request id
    assert json.loads(again) == {"delivery": 3}  # x1: consumed


def test_faults_fire_only_for_their_step_and_item(faults_spec: Callable[[str], None]) -> None:
    faults_spec("extract_evidence#2=duplicate,chunk_documents=hang")
    fn = _fn(records_delivery)

    lambda_runtime.run(fn, _step_event("extract_evidence", 1))
    lambda_runtime.run(fn, _step_event("extract_evidence", 2))
    lambda_runtime.run(fn, {"step": "chunk_documents", "job_id": "job_1", "error": "X"})  # a failure record
    lambda_runtime.run(fn, {"no": "step"})

    assert [event.get("item") for event, _ in DELIVERIES] == [1, 2, 2, None, None]


def test_hang_outlives_the_function_timeout_then_reports_sandbox_timedout(
    faults_spec: Callable[[str], None],
) -> None:
    faults_spec("draft_answer=hangx1")
    lambda_runtime.set_time_scale(0.01)
    fn = _fn(records_delivery, timeout=10)

    started = time.monotonic()
    payload, errored = lambda_runtime.run(fn, _step_event("draft_answer"))
    took = time.monotonic() - started

    error = json.loads(payload)
    assert errored and error["errorType"] == "Sandbox.Timedout"
    assert error["errorMessage"] == "Task timed out after 10.00 seconds"
    # scaled: (10 + margin) x 0.01 = 0.4 s, held to the Task timeout's real-time floor + 1 s: the Task times out first
    assert lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS + 1 <= took < lambda_runtime.TASK_TIMEOUT_FLOOR_SECONDS + 3
    assert DELIVERIES == []  # the handler never ran


def test_a_hang_is_released_by_interrupt_waits(faults_spec: Callable[[str], None]) -> None:
    faults_spec("draft_answer=hang")
    fn = _fn(records_delivery, function_name="stuck", timeout=900)
    results: list[tuple[bytes, bool]] = []
    worker = threading.Thread(target=lambda: results.append(lambda_runtime.run(fn, _step_event("draft_answer"))))
    worker.start()
    wait_until(lambda: lambda_runtime.hanging() or None, timeout=5, what="the hang")
    assert lambda_runtime.hanging() == ["stuck"]

    lambda_runtime.interrupt_waits()

    wait_until(lambda: results or None, timeout=5, what="the released invocation")
    assert json.loads(results[0][0])["errorType"] == "Sandbox.Timedout"
    assert lambda_runtime.hanging() == []
