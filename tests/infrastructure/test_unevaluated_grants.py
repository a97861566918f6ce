"""Grants for the services the local IAM enforcement cannot evaluate, checked against the calls the code makes.

The local platform authorizes every call of the services in `local.moto_patches.iam.RESOLVERS`; a call to any other
service (Bedrock's runtime: the offline model answers locally) never reaches moto. For those, the calls are read
from the source (each `aws.client("<service>")`, and the operations the module creating it calls on it), turned
into the IAM actions that authorize them, and the synthesized template (as `cdk deploy` configures it) must grant
each of them to every function that makes the call: the model steps for the model client.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore import xform_name

from local.moto_patches.iam import RESOLVERS, evaluate
from local.moto_patches.iam import Access as IamAccess
from longhaul.workflows import REGISTRY
from tests.infrastructure.conftest import ROOT

# An AWS fact, not a list of our calls: the operations IAM authorizes under another action's name.
AUTHORIZED_AS = {
    ("bedrock", "Converse"): "bedrock:InvokeModel",
    ("bedrock", "ConverseStream"): "bedrock:InvokeModelWithResponseStream",
}
#: The modules whose clients only the model steps build (`longhaul.adapters.models`: loaded by the model steps alone).
MODEL_MODULES = ("lambdas/longhaul/adapters/models/",)


def _calls() -> dict[tuple[str, str], set[str]]:
    """{(signing name, operation): modules} for every client of a service the local check does not evaluate."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in (ROOT / "lambdas").rglob("*.py"):
        tree = ast.parse(path.read_text())
        services = {
            node.args[0].value
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "client"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "aws"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        }
        for service in services:
            model = boto3.session.Session(region_name="us-east-1").client(service).meta.service_model
            signing = model.signing_name
            # Bedrock's control plane (batch inference jobs) is evaluated locally; its runtime, which signs as
            # `bedrock` too, is not.
            if signing in RESOLVERS and not (signing == "bedrock" and service != "bedrock"):
                continue
            operations = {xform_name(name): name for name in model.operation_names}
            called = {
                operations[node.func.attr]
                for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in operations
            }
            for operation in called:
                found.setdefault((signing, operation), set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_code_calls_bedrock_which_the_local_check_cannot_evaluate() -> None:
    assert ("bedrock", "Converse") in _calls()  # if not, this test checks nothing: re-read the model adapter


@pytest.fixture(scope="module")
def prod(bedrock_assembly: Path) -> dict[str, Any]:
    return json.loads(next(bedrock_assembly.glob("Longhaul-*.template.json")).read_text())


def _policies_of(template: dict[str, Any], function_id: str) -> list[dict[str, Any]]:
    resources = template["Resources"]
    role = resources[function_id]["Properties"]["Role"]["Fn::GetAtt"][0]
    return [
        r["Properties"]["PolicyDocument"]
        for r in resources.values()
        # CDK moves what does not fit in a role's inline policy into managed `OverflowPolicy`s: read both
        if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        and {"Ref": role} in r["Properties"].get("Roles", [])
    ]


def test_every_call_the_local_check_cannot_evaluate_is_granted_to_the_functions_that_make_it(
    prod: dict[str, Any],
) -> None:
    resources = prod["Resources"]
    model_steps = {
        fid
        for fid, r in resources.items()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Handler") == "handlers.steps.handler"
        and any(
            fid.startswith(f"Workflows{spec.name.title().replace('-', '')}{step.replace('_', '')}")
            for spec in REGISTRY.values()
            for step in spec.model_steps
        )
    }
    assert model_steps, "the model steps' functions"
    for (service, operation), modules in _calls().items():
        assert all(m.startswith(MODEL_MODULES) for m in modules), f"{service}:{operation} outside the model steps"
        action = AUTHORIZED_AS.get((service, operation), f"{service}:{operation}")
        for function_id in model_steps:
            policies = _policies_of(prod, function_id)
            granted = [
                s
                for p in policies
                for s in p["Statement"]
                if evaluate([{"Statement": [{**s, "Resource": "*"}]}], IamAccess(action, "*"))
            ]
            assert granted, f"{function_id} calls {service}:{operation} but its role lacks {action}"
