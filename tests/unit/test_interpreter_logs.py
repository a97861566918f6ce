"""Pins `moto_patches.quiet_interpreter_logs`: an expected stop logs no warning or error, a real failure one line.

Without the patch moto (5.2.5) logs every failure at ERROR with the failing state's whole `repr` and the cause, once
per level it crosses; when one of the `..._without_the_patch` tests fails, upstream changed: re-check the patch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import moto_patches
from local.deploy import wait_until
from tests.unit.aws_env import REGION, offline_credentials

ROLE = "arn:aws:iam::123456789012:role/machine"


def _stopping_fan_out() -> dict[str, Any]:
    """A fan-out whose items end in `JobStopped`, caught into the machine's own `JobStopped` Fail (as the builder)."""
    item = {"StartAt": "item stopped", "States": {"item stopped": {"Type": "Fail", "Error": "JobStopped"}}}
    fan_out = {
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, **item},
        "Catch": [{"ErrorEquals": ["JobStopped"], "Next": "Job stopped"}],
        "End": True,
    }
    stopped = {"Type": "Fail", "Error": "JobStopped", "Cause": "The job was cancelled or passed its deadline."}
    return {"StartAt": "fan out", "States": {"fan out": fan_out, "Job stopped": stopped}}


def _failing() -> dict[str, Any]:
    cause = json.dumps({"errorMessage": "the index is corrupt", "stackTrace": ["  File 'x.py', line 1\n"] * 40})
    return {"StartAt": "Job failed", "States": {"Job failed": {"Type": "Fail", "Error": "Broken", "Cause": cause}}}


def _run(definition: dict[str, Any]) -> str:
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(name="logs", definition=json.dumps(definition), roleArn=ROLE)
    arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], input='{"items": [1, 2, 3]}')["executionArn"]

    def ended() -> str | None:
        status: str = sfn.describe_execution(executionArn=arn)["status"]
        return None if status == "RUNNING" else status

    return wait_until(ended, timeout=30, what=arn)


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    if not was_applied:
        moto_patches.revert()


@pytest.fixture
def unpatched(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)
    was_applied = moto_patches.is_applied()
    moto_patches.revert()
    moto_patches.enable_execution()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    moto_patches.disable_execution()
    if was_applied:
        moto_patches.apply()


def _loud(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.usefixtures("unpatched")
def test_an_expected_stop_logs_kilobytes_at_error_without_the_patch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert _run(_stopping_fan_out()) == "FAILED"
    loud = _loud(caplog)
    assert loud and all(r.levelno == logging.ERROR for r in loud)
    assert sum(len(r.getMessage()) for r in loud) > 2000


@pytest.mark.usefixtures("patched")
def test_an_expected_stop_logs_nothing_at_warning_or_above_with_the_patch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert _run(_stopping_fan_out()) == "FAILED"
    assert not _loud(caplog), [r.getMessage()[:200] for r in _loud(caplog)]


@pytest.mark.usefixtures("patched")
def test_a_real_failure_logs_one_short_error_line_with_the_patch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert _run(_failing()) == "FAILED"
    (record,) = _loud(caplog)
    message = record.getMessage()
    assert record.levelno == logging.ERROR
    assert "'Job failed'" in message and "Broken: the index is corrupt" in message
    assert "\n" not in message and len(message) < 300


def _choice_on_a_missing_field() -> dict[str, Any]:
    """A `when=` as the builder writes it: a comparison guarded by `IsPresent`, on a field the input lacks."""
    rule = {
        "And": [
            {"Variable": "$.steps.check.flag", "IsPresent": True},
            {"Variable": "$.steps.check.flag", "BooleanEquals": True},
        ],
        "Next": "ran",
    }
    done = {"Type": "Succeed"}
    return {
        "StartAt": "when?",
        "States": {"when?": {"Type": "Choice", "Choices": [rule], "Default": "skipped"}, "ran": done, "skipped": done},
    }


@pytest.mark.usefixtures("unpatched")
def test_a_choice_on_a_missing_field_logs_an_error_without_the_patch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert _run(_choice_on_a_missing_field()) == "SUCCEEDED"
    assert any("NoSuchJsonPath" in r.getMessage() for r in _loud(caplog))


@pytest.mark.usefixtures("patched")
def test_a_choice_on_a_missing_field_logs_nothing_at_warning_or_above_with_the_patch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    assert _run(_choice_on_a_missing_field()) == "SUCCEEDED"
    assert not _loud(caplog), [r.getMessage()[:200] for r in _loud(caplog)]


def _waiting_fan_out() -> dict[str, Any]:
    """A fan-out whose items wait (a model call, an OCR task): stopped while they do, as a cancelled job is."""
    item = {"StartAt": "work", "States": {"work": {"Type": "Wait", "Seconds": 30, "End": True}}}
    fan_out = {
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, **item},
        "End": True,
    }
    return {"StartAt": "fan out", "States": {"fan out": fan_out}}


@pytest.mark.usefixtures("patched")
def test_stopping_an_execution_during_a_fan_out_logs_nothing_at_warning_or_above_with_the_patch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="local.moto_patches")
    sfn = boto3.client("stepfunctions", region_name=REGION)
    machine = sfn.create_state_machine(name="stop", definition=json.dumps(_waiting_fan_out()), roleArn=ROLE)
    arn = sfn.start_execution(stateMachineArn=machine["stateMachineArn"], input='{"items": [1, 2, 3]}')["executionArn"]

    def waiting() -> bool | None:
        events = sfn.get_execution_history(executionArn=arn)["events"]
        return sum(e["type"] == "WaitStateEntered" for e in events) == 3 or None

    wait_until(waiting, timeout=30, what="the items to wait")
    sfn.stop_execution(executionArn=arn, error="JobStopped", cause="cancelled")
    wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] == "ABORTED" or None, timeout=30)
    # the aborted items unwind in their own threads: wait for their line, whatever its level
    wait_until(
        lambda: any(moto_patches.ABORTED_ITERATION in r.getMessage() for r in caplog.records) or None,
        timeout=30,
        what="the aborted iterations to be logged",
    )
    assert not _loud(caplog), [r.getMessage()[:200] for r in _loud(caplog)]
