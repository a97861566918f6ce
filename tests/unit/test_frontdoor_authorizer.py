"""The local front door runs the API's Lambda authorizer as API Gateway does: before the routes that declare it
(`authorizationType: CUSTOM`), its answer kept by the identity header for the TTL the template declares; public
routes stay public. The authorizer is read from the synthesized template (`local.deploy`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from local.deploy import ApiAuthorizer, _authorizer
from local.frontdoor import FrontDoor, GatewayAuthorizer
from tests.unit.test_frontdoor import URI, Integration

AUTHORIZER = "arn:aws:lambda:us-east-1:123456789012:function:authorizer"


class Gateway:
    """A REST API with one authorized route and one public route."""

    def get_resources(self, **_: Any) -> dict[str, Any]:
        return {
            "items": [
                {"id": "r1", "path": "/v1/jobs", "resourceMethods": {"GET": {"authorizationType": "CUSTOM"}}},
                {"id": "r2", "path": "/v1/health", "resourceMethods": {"GET": {"authorizationType": "NONE"}}},
            ]
        }

    def get_integration(self, **_: Any) -> dict[str, Any]:
        return {"uri": URI}

    def get_rest_api(self, **_: Any) -> dict[str, Any]:
        return {}


class Authorizer:
    """The authorizer function: allows `good`, raises Unauthorized for anything else; counts its invocations."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, arn: str, event: dict[str, Any]) -> tuple[bytes, bool]:
        assert arn == AUTHORIZER
        self.events.append(event)
        if event["headers"].get("Authorization") != "Bearer good":
            return json.dumps({"errorType": "Unauthorized", "errorMessage": "Unauthorized"}).encode(), True
        api, _, _ = event["methodArn"].partition("/")
        policy = {"Statement": [{"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": f"{api}/v1/*"}]}
        answer = {"principalId": "acme/tenant/k1", "policyDocument": policy, "context": {"tenant_id": "acme"}}
        return json.dumps(answer).encode(), False


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def door(ttl: int = 300) -> tuple[FrontDoor, Integration, Authorizer, Clock]:
    integration, function, clock = Integration(), Authorizer(), Clock()
    gateway_authorizer = GatewayAuthorizer(AUTHORIZER, "Authorization", ttl, invoke=function, clock=clock)
    front = FrontDoor(Gateway(), "api1", "v1", integration=integration, authorizer=gateway_authorizer)
    return front, integration, function, clock


def get(front: FrontDoor, path: str, authorization: str | None = None) -> Any:
    headers = {"Authorization": authorization} if authorization else {}
    return front.handle(Request(EnvironBuilder(path=path, headers=headers).get_environ()))


def test_an_allowed_request_reaches_the_function_with_the_authorizers_context_and_the_answer_is_kept() -> None:
    front, integration, function, clock = door()

    first, second = get(front, "/v1/jobs", "Bearer good"), get(front, "/v1/jobs", "Bearer good")
    clock.now += 301
    third = get(front, "/v1/jobs", "Bearer good")

    assert [first.status_code, second.status_code, third.status_code] == [200, 200, 200]
    assert len(function.events) == 2  # kept for the TTL, asked again after it
    (event, *_) = function.events
    assert event["type"] == "REQUEST" and event["methodArn"].endswith(":api1/v1/GET/v1/jobs")
    assert event["headers"]["Authorization"] == "Bearer good"
    assert integration.events[0]["requestContext"]["authorizer"] == {
        "tenant_id": "acme",
        "principalId": "acme/tenant/k1",
    }


@pytest.mark.parametrize("authorization", [None, "Bearer bad"])
def test_a_refused_or_missing_key_is_a_401_problem_and_never_reaches_the_function(authorization: str | None) -> None:
    front, integration, function, _ = door()

    refused = get(front, "/v1/jobs", authorization)

    assert refused.status_code == 401 and refused.mimetype == "application/problem+json"
    assert json.loads(refused.get_data())["type"] == "https://longhaul.dev/problems/unauthorized"
    assert refused.headers["WWW-Authenticate"] == 'Bearer realm="longhaul"'
    assert integration.events == []
    assert len(function.events) == (0 if authorization is None else 1)  # no identity: no call


def test_a_public_route_runs_no_authorizer() -> None:
    front, integration, function, _ = door()

    answered = get(front, "/v1/health")

    assert answered.status_code == 200 and function.events == []
    assert "authorizer" not in integration.events[0]["requestContext"]


def test_a_ttl_of_zero_asks_every_time() -> None:
    front, _, function, _ = door(ttl=0)

    get(front, "/v1/jobs", "Bearer good")
    get(front, "/v1/jobs", "Bearer good")

    assert len(function.events) == 2


def test_the_authorizer_is_read_from_the_template() -> None:
    declared = {
        "KeysAuthorizer": {
            "Type": "AWS::ApiGateway::Authorizer",
            "Properties": {
                "AuthorizerResultTtlInSeconds": 120,
                "IdentitySource": "method.request.header.Authorization",
                "Type": "REQUEST",
                "AuthorizerUri": {
                    "Fn::Join": [
                        "",
                        ["arn:aws:apigateway:", {"Fn::GetAtt": ["ApiAuthorizer1234", "Arn"]}, "/invocations"],
                    ]
                },
            },
        }
    }
    functions = {"ApiAuthorizer1234": "stack-Authorizer", "ApiFunction": "stack-Api"}

    assert _authorizer(declared, functions) == ApiAuthorizer("stack-Authorizer", "Authorization", 120)
    assert _authorizer({}, functions) is None
