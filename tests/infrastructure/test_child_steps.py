"""Branches and child steps in the synthesized state machines: a step with `when=` sits behind a Choice whose rule is
its predicate (each leaf guarded by `IsPresent` and its type) and whose default records it skipped; a child step is a
`.waitForTaskToken` Task of its own function, bounded, whose end (or timeout) goes on to the step's Task; the grants
that let a child step submit its child and let the child's functions resume the parent's wait."""

from __future__ import annotations

import json
from typing import Any

import pytest

from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import definition, resources, workflow_level

WAIT_ENDED = {"States.Timeout", "States.HeartbeatTimeout"}


@pytest.fixture(scope="module")
def machines(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = {}
    for machine in resources(template, "AWS::StepFunctions::StateMachine").values():
        asl = definition(machine)
        if str(asl.get("Comment", "")).startswith("Longhaul workflow "):
            found[asl["Comment"].removeprefix("Longhaul workflow ")] = asl
    return found


def _payload(state: dict[str, Any]) -> dict[str, Any]:
    parameters = state.get("Parameters") or {}
    return dict(parameters.get("Payload", parameters))


def test_a_step_with_when_is_behind_a_choice_of_its_predicate_and_a_skip_that_records_it(
    machines: dict[str, dict[str, Any]],
) -> None:
    states = workflow_level(machines["invoice-reconciliation"]["States"])
    choice = states["resolve_disputes: when?"]
    assert states["publish_report"]["Next"] == "resolve_disputes: when?"
    assert choice["Type"] == "Choice" and json.loads(choice["Comment"]) == (
        REGISTRY["invoice-reconciliation"].step("resolve_disputes").when.as_json()  # type: ignore[union-attr]
    )
    (rule,) = choice["Choices"]
    assert rule["Next"] == "resolve_disputes: wait for child"
    flag, count = rule["And"]
    assert {"Variable": "$.steps.check_invoices.resolve_disputes", "IsPresent": True} in flag["And"]
    assert {"Variable": "$.steps.check_invoices.resolve_disputes", "BooleanEquals": True} in flag["And"]
    assert {"Variable": "$.steps.check_invoices.discrepancies", "IsNumeric": True} in count["And"]
    assert {"Variable": "$.steps.check_invoices.discrepancies", "NumericGreaterThan": 0} in count["And"]
    skip = states[choice["Default"]]
    assert choice["Default"] == "resolve_disputes: skipped"
    assert _payload(skip)["skipped"] is True and _payload(skip)["step"] == "resolve_disputes"
    assert skip["ResultPath"] == "$.steps.resolve_disputes" and skip.get("Catch") and skip.get("Retry")
    assert skip["Next"] == states["resolve_disputes"]["Next"] == "Job completed", "both ways end alike"


def test_a_child_step_waits_on_its_token_then_runs_its_step(machines: dict[str, dict[str, Any]]) -> None:
    states = workflow_level(machines["invoice-reconciliation"]["States"])
    wait = states["resolve_disputes: wait for child"]
    assert wait["Resource"].endswith("lambda:invoke.waitForTaskToken")
    assert "token.$" in _payload(wait) and _payload(wait)["step"] == "resolve_disputes"
    assert wait["TimeoutSeconds"] >= 24 * 3600, "bounded, past the longest deadline"
    assert wait["Next"] == "resolve_disputes" and wait["ResultPath"] is None
    late = [c for c in wait["Catch"] if set(c["ErrorEquals"]) & WAIT_ENDED]
    assert late and late[0]["Next"] == "resolve_disputes", "a wait that ended: the step says the child is late"
    step = states["resolve_disputes"]
    assert step["ResultPath"] == "$.steps.resolve_disputes" and step.get("Retry") and step.get("Catch")
    failing = {n for c in step["Catch"] for n in c["ErrorEquals"]}
    assert "States.ALL" in failing, "a failed child fails the step through its failure path"


def test_workflows_without_branches_or_children_have_no_such_states(machines: dict[str, dict[str, Any]]) -> None:
    for workflow in ("document-analysis", "dispute-resolution"):
        names = workflow_level(machines[workflow]["States"])
        assert not [n for n in names if n.endswith((": when?", ": skipped", ": wait for child"))]


def _statements(template: dict[str, Any], role_fragment: str) -> list[dict[str, Any]]:
    found = []
    for policy in resources(template, "AWS::IAM::Policy").values():
        roles = json.dumps(policy["Properties"].get("Roles", []))
        if role_fragment in roles:
            found += policy["Properties"]["PolicyDocument"]["Statement"]
    return found


def test_a_child_step_may_start_executions_and_a_childs_functions_resume_only_the_parents_wait(
    template: dict[str, Any],
) -> None:
    starting = _statements(template, "InvoiceReconciliationresolvedisputes")
    assert any(s["Action"] == "states:StartExecution" for s in starting)
    resuming = _statements(template, "DisputeResolutionpublishresult")
    responses = [s for s in resuming if s["Action"] == ["states:SendTaskSuccess", "states:SendTaskFailure"]]
    assert responses and all("invoice-reconciliation" in json.dumps(s["Resource"]) for s in responses)
