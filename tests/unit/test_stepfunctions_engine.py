"""The engine adapter (`longhaul.adapters.stepfunctions.StepFunctionsEngine`) against moto's Step Functions: one
execution per name, stopping is idempotent, a missing execution is `NOT_STARTED`, and AWS errors become the port's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from longhaul.adapters.stepfunctions import StepFunctionsEngine, execution_arn
from longhaul.core.ports import EngineUnavailable, Execution, ExecutionStatus, RedriveRefused

WORKFLOW = "document-analysis"
STATE = {"job_id": "job_1", "tenant_id": "tenant-a", "workflow": WORKFLOW, "input_key": "work/job_1/input.json"}


@pytest.fixture
def engine(sfn: Any, state_machine_arn: str) -> StepFunctionsEngine:
    return StepFunctionsEngine(sfn, {WORKFLOW: state_machine_arn})


def executions(sfn: Any, arn: str) -> list[str]:
    return [e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]]


def test_execution_arn_names_the_execution_of_the_state_machine() -> None:
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:document-analysis"

    assert (
        execution_arn(machine, "job_1-r2")
        == "arn:aws:states:us-east-1:123456789012:execution:document-analysis:job_1-r2"
    )


def test_start_runs_one_execution_named_as_asked_with_the_state_as_input(
    engine: StepFunctionsEngine, sfn: Any, state_machine_arn: str
) -> None:
    engine.start(WORKFLOW, "job_1", STATE)

    assert executions(sfn, state_machine_arn) == ["job_1"]
    described = sfn.describe_execution(executionArn=execution_arn(state_machine_arn, "job_1"))
    assert json.loads(described["input"]) == STATE
    assert engine.describe(WORKFLOW, "job_1") == Execution(ExecutionStatus.RUNNING)


@pytest.mark.parametrize("second", [STATE, {**STATE, "steps": {"parse": {}}}], ids=["same-input", "other-input"])
def test_starting_twice_is_one_execution(
    engine: StepFunctionsEngine, sfn: Any, state_machine_arn: str, second: dict[str, Any]
) -> None:
    engine.start(WORKFLOW, "job_1", STATE)

    engine.start(WORKFLOW, "job_1", second)  # a retried submission: the execution exists, so it counts as started

    assert executions(sfn, state_machine_arn) == ["job_1"]


def test_stop_aborts_a_running_execution_and_a_second_stop_is_fine(engine: StepFunctionsEngine) -> None:
    engine.start(WORKFLOW, "job_1", STATE)

    engine.stop(WORKFLOW, "job_1", error="JobCancelled", cause="cancelled by tenant-a")
    engine.stop(WORKFLOW, "job_1", error="JobCancelled")

    assert engine.describe(WORKFLOW, "job_1").status == ExecutionStatus.ABORTED


def test_stopping_an_execution_that_does_not_exist_is_fine(engine: StepFunctionsEngine) -> None:
    engine.stop(WORKFLOW, "job_never_started", error="JobExpired")

    assert engine.describe(WORKFLOW, "job_never_started") == Execution(ExecutionStatus.NOT_STARTED)


def test_an_execution_that_does_not_exist_is_not_started(engine: StepFunctionsEngine) -> None:
    assert engine.describe(WORKFLOW, "job_missing").status == ExecutionStatus.NOT_STARTED


def test_an_undeployed_workflow_is_engine_unavailable(engine: StepFunctionsEngine) -> None:
    with pytest.raises(EngineUnavailable, match="not deployed"):
        engine.start("invoice-reconciliation-v0", "job_1", STATE)
    with pytest.raises(EngineUnavailable):
        engine.stop("invoice-reconciliation-v0", "job_1", error="JobCancelled")


def test_a_state_machine_that_is_gone_is_engine_unavailable(sfn: Any, state_machine_arn: str) -> None:
    engine = StepFunctionsEngine(sfn, {WORKFLOW: state_machine_arn + "-deleted"})

    with pytest.raises(EngineUnavailable, match="StateMachineDoesNotExist"):
        engine.start(WORKFLOW, "job_1", STATE)


class Unreachable:
    """A Step Functions client whose calls fail the way an unreachable or throttling endpoint does."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __getattr__(self, name: str) -> Any:
        def call(**kwargs: Any) -> Any:
            raise self.error

        return call


THROTTLED = ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "Op")
UNREACHABLE = EndpointConnectionError(endpoint_url="https://states.us-east-1.amazonaws.com")


@pytest.mark.parametrize("error", [THROTTLED, UNREACHABLE], ids=["throttled", "unreachable"])
def test_start_and_stop_failures_are_engine_unavailable(error: Exception) -> None:
    engine = StepFunctionsEngine(Unreachable(error), {WORKFLOW: "arn:aws:states:us-east-1:1:stateMachine:m"})

    with pytest.raises(EngineUnavailable):
        engine.start(WORKFLOW, "job_1", STATE)
    with pytest.raises(EngineUnavailable):
        engine.stop(WORKFLOW, "job_1", error="JobCancelled")


def test_a_throttled_describe_is_engine_unavailable() -> None:
    engine = StepFunctionsEngine(Unreachable(THROTTLED), {WORKFLOW: "arn:aws:states:us-east-1:1:stateMachine:m"})

    with pytest.raises(EngineUnavailable, match="ThrottlingException"):
        engine.describe(WORKFLOW, "job_1")


def test_a_redrive_the_engine_rejects_is_refused_with_its_message() -> None:
    refusal = ClientError(
        {"Error": {"Code": "ExecutionNotRedrivable", "Message": "Execution is RUNNING and cannot be redriven"}}, "Op"
    )
    engine = StepFunctionsEngine(Unreachable(refusal), {WORKFLOW: "arn:aws:states:us-east-1:1:stateMachine:m"})

    with pytest.raises(RedriveRefused, match="cannot be redriven"):
        engine.redrive(WORKFLOW, "job_1")


def test_a_redrive_where_it_is_not_implemented_is_refused(engine: StepFunctionsEngine) -> None:
    """moto has no RedriveExecution: the local runtime answers with a refusal, not a crash."""
    engine.start(WORKFLOW, "job_1", STATE)
    engine.stop(WORKFLOW, "job_1", error="JobCancelled")

    with pytest.raises(RedriveRefused, match="not available"):
        engine.redrive(WORKFLOW, "job_1")


def test_the_definition_is_the_one_the_execution_runs_or_the_deployed_one_before_it_starts(
    engine: StepFunctionsEngine, sfn: Any, state_machine_arn: str
) -> None:
    deployed = sfn.describe_state_machine(stateMachineArn=state_machine_arn)["definition"]

    before = engine.definition(WORKFLOW, "job_1")
    engine.start(WORKFLOW, "job_1", STATE)
    running = engine.definition(WORKFLOW, "job_1")

    assert json.loads(before) == json.loads(deployed) == json.loads(running)
    with pytest.raises(EngineUnavailable, match="ThrottlingException"):
        StepFunctionsEngine(Unreachable(THROTTLED), {WORKFLOW: state_machine_arn}).definition(WORKFLOW, "job_1")


def test_before_it_starts_a_job_started_through_an_alias_reads_the_machines_definition(
    sfn: Any, state_machine_arn: str
) -> None:
    """Jobs start through the workflow's `live` alias; DescribeStateMachine takes no alias ARN."""
    deployed = sfn.describe_state_machine(stateMachineArn=state_machine_arn)["definition"]
    calls: list[str] = []

    class Recording:
        def __getattr__(self, name: str) -> Any:
            return getattr(sfn, name)

        def describe_state_machine(self, **kwargs: Any) -> Any:
            calls.append(kwargs["stateMachineArn"])
            return sfn.describe_state_machine(**kwargs)

    engine = StepFunctionsEngine(Recording(), {WORKFLOW: f"{state_machine_arn}:live"})

    assert json.loads(engine.definition(WORKFLOW, "job_not_started")) == json.loads(deployed)
    assert calls == [state_machine_arn]


class OneMapRun:
    """A history with a Distributed Map run; listing the run's children is not expected."""

    def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
        return {
            "events": [
                {"id": 1, "type": "MapStateEntered", "stateEnteredEventDetails": {"name": "parse_documents"}},
                {"id": 2, "type": "MapRunStarted", "mapRunStartedEventDetails": {"mapRunArn": "arn:run"}},
                {"id": 3, "type": "MapStateExited", "stateExitedEventDetails": {"name": "parse_documents"}},
            ]
        }

    def list_executions(self, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the children were listed")


def test_a_history_names_each_states_events_and_reads_the_children_only_when_asked() -> None:
    engine = StepFunctionsEngine(OneMapRun(), {WORKFLOW: "arn:aws:states:us-east-1:1:stateMachine:m"})

    history = engine.history(WORKFLOW, "job_1", children=False)

    assert [(e.type, e.state) for e in history.events] == [
        ("MapStateEntered", "parse_documents"),
        ("MapRunStarted", None),
        ("MapStateExited", "parse_documents"),
    ]
    assert history.children == [] and history.complete
    with pytest.raises(AssertionError, match="children were listed"):
        engine.history(WORKFLOW, "job_1")
