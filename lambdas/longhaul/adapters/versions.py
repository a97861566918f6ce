"""The versions a deploy leaves behind, on AWS: each workflow's state machine versions (and the Lambda versions each
one's definition invokes), where its alias routes, and deleting a version. For the operators' prune command."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# A qualified Lambda ARN, as a state machine version's definition names the function version a Task invokes.
FUNCTION_VERSION = re.compile(r"arn:aws[a-z-]*:lambda:[a-z0-9-]+:\d{12}:function:[A-Za-z0-9_-]+:\d+")


@dataclass(frozen=True)
class MachineVersion:
    arn: str
    functions: frozenset[str]  # the Lambda versions (qualified ARNs) its definition invokes

    @property
    def number(self) -> int:
        return int(self.arn.rsplit(":", 1)[1])


class StepFunctionsVersions:
    def __init__(self, stepfunctions: Any, lambda_: Any) -> None:
        self._sfn = stepfunctions
        self._lambda = lambda_

    def versions(self, machine_arn: str) -> list[MachineVersion]:
        """The machine's versions, newest first, each with the function versions it invokes."""
        arns: list[str] = []
        kwargs: dict[str, Any] = {"stateMachineArn": machine_arn}
        while True:
            page = self._sfn.list_state_machine_versions(**kwargs)
            arns += [v["stateMachineVersionArn"] for v in page.get("stateMachineVersions", [])]
            if not page.get("nextToken"):
                break
            kwargs["nextToken"] = page["nextToken"]
        return [self._version(arn) for arn in arns]

    def _version(self, arn: str) -> MachineVersion:
        definition = self._sfn.describe_state_machine(stateMachineArn=arn)["definition"]
        return MachineVersion(arn, frozenset(FUNCTION_VERSION.findall(definition)))

    def routed(self, alias_arn: str) -> set[str]:
        """The versions the alias routes new executions to."""
        described = self._sfn.describe_state_machine_alias(stateMachineAliasArn=alias_arn)
        return {str(r["stateMachineVersionArn"]) for r in described.get("routingConfiguration", [])}

    def delete_machine_version(self, arn: str) -> None:
        self._sfn.delete_state_machine_version(stateMachineVersionArn=arn)

    def delete_function_version(self, qualified_arn: str) -> None:
        name, _, number = qualified_arn.rpartition(":")
        self._lambda.delete_function(FunctionName=name, Qualifier=number)
