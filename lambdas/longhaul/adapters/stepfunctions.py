"""The workflow engine on AWS Step Functions: execution names → ARNs, and its error codes → the port's errors.

A workflow is configured by the ARN its jobs start through: its state machine's `live` alias (or, unversioned, the
machine itself). Executions, whichever version or alias started them, are the machine's: their ARNs name it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core.ports import (
    EngineUnavailable,
    Execution,
    ExecutionHistory,
    ExecutionStatus,
    HistoryEvent,
    RedriveRefused,
)

# DescribeStateMachineForExecution of an execution that does not exist (yet): AWS's code, and moto's.
NO_EXECUTION = frozenset({"ExecutionDoesNotExist", "ResourceNotFound"})


def machine_arn(arn: str) -> str:
    """The state machine of a machine, version (`…:<n>`) or alias (`…:<name>`) ARN."""
    return ":".join(arn.split(":")[:7])


def execution_arn(state_machine_arn: str, execution_name: str) -> str:
    return machine_arn(state_machine_arn).replace(":stateMachine:", ":execution:") + f":{execution_name}"


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


class StepFunctionsEngine:
    def __init__(self, client: Any, state_machines: Mapping[str, str]) -> None:
        self._client = client
        self._machines = dict(state_machines)

    def _machine(self, workflow: str) -> str:
        try:
            return self._machines[workflow]
        except KeyError:
            raise EngineUnavailable(f"workflow {workflow!r} is not deployed") from None

    def start(self, workflow: str, execution: str, state: Mapping[str, Any], *, version: str | None = None) -> None:
        target = self._machine(workflow)
        if version is not None and machine_arn(version) != machine_arn(target):
            raise EngineUnavailable(f"{version} is not a version of workflow {workflow!r}")
        try:
            self._client.start_execution(
                stateMachineArn=version or target, name=execution, input=json.dumps(dict(state))
            )
        except ClientError as error:
            if _code(error) != "ExecutionAlreadyExists":
                raise EngineUnavailable(f"StartExecution: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"StartExecution: {type(error).__name__}") from error

    def has_version(self, workflow: str, version: str) -> bool:
        if machine_arn(version) != machine_arn(self._machine(workflow)):
            return False
        try:
            self._client.describe_state_machine(stateMachineArn=version)
            return True
        except ClientError as error:
            if _code(error) in ("StateMachineDoesNotExist", "ResourceNotFound", "ResourceNotFoundException"):
                return False
            raise EngineUnavailable(f"DescribeStateMachine: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"DescribeStateMachine: {type(error).__name__}") from error

    def version_of(self, execution_arn: str) -> str | None:
        try:
            described = self._client.describe_execution(executionArn=execution_arn)
        except ClientError as error:
            if _code(error) == "ExecutionDoesNotExist":
                return None
            raise EngineUnavailable(f"DescribeExecution: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"DescribeExecution: {type(error).__name__}") from error
        version: str | None = described.get("stateMachineVersionArn")
        return version

    def stop(self, workflow: str, execution: str, *, error: str, cause: str = "") -> None:
        arn = execution_arn(self._machine(workflow), execution)
        try:
            self._client.stop_execution(executionArn=arn, error=error, cause=cause)
        except ClientError as failure:
            if _code(failure) != "ExecutionDoesNotExist":
                raise EngineUnavailable(f"StopExecution: {_code(failure)}") from failure
        except BotoCoreError as failure:
            raise EngineUnavailable(f"StopExecution: {type(failure).__name__}") from failure

    def describe(self, workflow: str, execution: str) -> Execution:
        arn = execution_arn(self._machine(workflow), execution)
        try:
            described = self._client.describe_execution(executionArn=arn)
        except ClientError as error:
            if _code(error) == "ExecutionDoesNotExist":
                return Execution(ExecutionStatus.NOT_STARTED)
            raise EngineUnavailable(f"DescribeExecution: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"DescribeExecution: {type(error).__name__}") from error
        return Execution(
            ExecutionStatus(described["status"]), described.get("error"), described.get("stateMachineVersionArn")
        )

    def redrive(self, workflow: str, execution: str) -> None:
        arn = execution_arn(self._machine(workflow), execution)
        try:
            self._client.redrive_execution(executionArn=arn)
        except ClientError as error:
            message = error.response.get("Error", {}).get("Message") or _code(error)
            raise RedriveRefused(str(message)) from None
        except (BotoCoreError, AttributeError, NotImplementedError) as error:
            raise RedriveRefused(f"redrive is not available here ({type(error).__name__})") from None

    def history(self, workflow: str, execution: str, *, children: bool = True) -> ExecutionHistory:
        arn = execution_arn(self._machine(workflow), execution)
        try:
            events = self._events(arn)
        except ClientError as error:
            if _code(error) == "ExecutionDoesNotExist":
                return ExecutionHistory()
            raise EngineUnavailable(f"GetExecutionHistory: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"GetExecutionHistory: {type(error).__name__}") from error
        if not children:
            return ExecutionHistory(events=events)
        child_events: list[list[HistoryEvent]] = []
        complete = True
        for run in (e.map_run_arn for e in events if e.map_run_arn):
            try:  # best effort: the children's transitions are billed too, but an older engine may not list them
                for child in self._pages("list_executions", "executions", mapRunArn=run):
                    child_events.append(self._events(child["executionArn"]))
            except (ClientError, BotoCoreError, TypeError):
                complete = False
        return ExecutionHistory(events=events, children=child_events, complete=complete)

    def definition(self, workflow: str, execution: str) -> str:
        machine = self._machine(workflow)
        try:
            try:
                described = self._client.describe_state_machine_for_execution(
                    executionArn=execution_arn(machine, execution)
                )
            except ClientError as error:
                if _code(error) not in NO_EXECUTION:
                    raise
                # not started yet: the machine's current definition, which its `live` alias is moved to on every
                # deploy (DescribeStateMachine takes a machine or version ARN, not an alias's)
                described = self._client.describe_state_machine(stateMachineArn=machine_arn(machine))
        except ClientError as error:
            raise EngineUnavailable(f"DescribeStateMachine: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"DescribeStateMachine: {type(error).__name__}") from error
        return str(described["definition"])

    def _events(self, arn: str) -> list[HistoryEvent]:
        return [
            HistoryEvent(
                id=int(e["id"]),
                type=str(e["type"]),
                previous_id=int(e["previousEventId"]) if e.get("previousEventId") is not None else None,
                map_run_arn=(e.get("mapRunStartedEventDetails") or {}).get("mapRunArn"),
                resource_type="lambda"
                if str(e["type"]).startswith("LambdaFunction")
                else (e.get("taskScheduledEventDetails") or {}).get("resourceType"),
                state=(e.get("stateEnteredEventDetails") or e.get("stateExitedEventDetails") or {}).get("name"),
            )
            for e in self._pages("get_execution_history", "events", executionArn=arn, maxResults=1000)
        ]

    def _pages(self, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while True:
            page = getattr(self._client, operation)(**kwargs)
            items.extend(page.get(key, []))
            if not page.get("nextToken"):
                return items
            kwargs["nextToken"] = page["nextToken"]


class StepFunctionsTokens:
    """Task tokens of `.waitForTaskToken` Tasks (reviews)."""

    GONE = frozenset({"TaskTimedOut", "TaskDoesNotExist", "InvalidToken"})

    def __init__(self, client: Any) -> None:
        self._client = client

    def succeed(self, token: str, output: Mapping[str, Any]) -> bool:
        return self._send(lambda: self._client.send_task_success(taskToken=token, output=json.dumps(dict(output))))

    def fail(self, token: str, *, error: str, cause: str = "") -> bool:
        return self._send(lambda: self._client.send_task_failure(taskToken=token, error=error, cause=cause))

    def _send(self, call: Any) -> bool:
        try:
            call()
            return True
        except ClientError as error:
            if _code(error) in self.GONE:
                return False
            raise EngineUnavailable(f"SendTask*: {_code(error)}") from None  # never echo the token
        except BotoCoreError as error:
            raise EngineUnavailable(f"SendTask*: {type(error).__name__}") from None


class StepFunctionsDispatch:
    """Webhook deliveries as executions of the delivery state machine, named by the webhook id (so a webhook is
    delivered by one run however often it is started)."""

    def __init__(self, client: Any, state_machine_arn: str) -> None:
        self._client = client
        self._arn = state_machine_arn

    def start(self, webhook_id: str, job_id: str, *, name: str | None = None) -> None:
        try:
            self._client.start_execution(
                stateMachineArn=self._arn,
                name=name or webhook_id,
                input=json.dumps({"webhook_id": webhook_id, "job_id": job_id}),
            )
        except ClientError as error:
            if _code(error) != "ExecutionAlreadyExists":
                raise EngineUnavailable(f"StartExecution: {_code(error)}") from error
        except BotoCoreError as error:
            raise EngineUnavailable(f"StartExecution: {type(error).__name__}") from error
