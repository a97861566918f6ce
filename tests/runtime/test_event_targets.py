"""`moto_patches.event_targets`: an EventBridge rule's Lambda targets are invoked (through the platform's invoker),
with the target's input transformer applied, for `PutEvents` and for S3's EventBridge notifications; without the
patch moto raises at a Lambda target (and stops before the rule's later targets)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from local import moto_patches
from local.moto_patches import event_targets
from tests.runtime.upstream import digest
from tests.unit.aws_env import REGION, offline_credentials

FUNCTION = f"arn:aws:lambda:{REGION}:123456789012:function:f"
TEMPLATE = '{"longhaul_trigger": "rule", "trigger_id": "trg_1", "event": <aws.events.event.json>}'


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    offline_credentials(monkeypatch)


@pytest.fixture
def invoked() -> Iterator[list[tuple[str, dict[str, Any]]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    event_targets.INVOKE[:] = [lambda arn, event: calls.append((arn, event))]
    yield calls
    event_targets.INVOKE.clear()


@pytest.fixture
def patched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.apply()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    if not was_applied:
        moto_patches.revert()


@pytest.fixture
def unpatched() -> Iterator[None]:
    was_applied = moto_patches.is_applied()
    moto_patches.revert()
    with mock_aws(config=moto_patches.RUNTIME_CONFIG):
        yield
    if was_applied:
        moto_patches.apply()


def _rules() -> tuple[Any, str]:
    """A rule on a bus with a Lambda target (an input transformer) and a queue after it; the queue's URL."""
    events = boto3.client("events", region_name=REGION)
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="after")["QueueUrl"]
    events.create_event_bus(Name="bus")
    events.put_rule(Name="r", EventBusName="bus", EventPattern=json.dumps({"source": ["acme.orders"]}))
    events.put_targets(
        Rule="r",
        EventBusName="bus",
        Targets=[
            {"Id": "f", "Arn": FUNCTION, "InputTransformer": {"InputTemplate": TEMPLATE}},
            {"Id": "q", "Arn": f"arn:aws:sqs:{REGION}:123456789012:after"},
        ],
    )
    return events, queue


def _put(events: Any, source: str = "acme.orders") -> None:
    events.put_events(
        Entries=[{"EventBusName": "bus", "Source": source, "DetailType": "Order Placed", "Detail": '{"id": 7}'}]
    )


def _queued(queue: str) -> int:
    return len(boto3.client("sqs", region_name=REGION).receive_message(QueueUrl=queue).get("Messages", []))


def test_the_upstream_delivery_the_patch_repeats_is_unchanged() -> None:
    from moto.events.models import Rule
    from moto.events.utils import EventTemplateParser

    assert digest(moto_patches._original(Rule, "send_to_targets")) == "82e819230f34d29a", "re-check event_targets"
    assert digest(EventTemplateParser.parse) == "316594ec2a681a96", "re-check event_targets"


@pytest.mark.usefixtures("unpatched")
def test_without_the_patch_a_lambda_target_is_not_invoked_and_stops_the_rules_delivery(invoked) -> None:
    events, queue = _rules()
    with pytest.raises(Exception, match="Expr not defined"):
        _put(events)
    assert invoked == [] and _queued(queue) == 0


@pytest.mark.usefixtures("patched")
def test_with_the_patch_a_matching_events_lambda_target_gets_its_transformed_input(invoked) -> None:
    events, queue = _rules()
    _put(events)
    _put(events, source="someone.else")  # no match: nothing
    ((arn, event),) = invoked
    assert arn == FUNCTION
    assert event["longhaul_trigger"] == "rule" and event["trigger_id"] == "trg_1"
    assert event["event"]["source"] == "acme.orders" and event["event"]["detail"] == {"id": 7}
    assert _queued(queue) == 1  # moto's own delivery to the targets it knows goes on


@pytest.mark.usefixtures("patched")
def test_with_the_patch_a_disabled_rule_invokes_nothing(invoked) -> None:
    events, _ = _rules()
    events.disable_rule(Name="r", EventBusName="bus")
    _put(events)
    assert invoked == []


@pytest.mark.usefixtures("patched")
def test_with_the_patch_s3_eventbridge_notifications_reach_a_rules_lambda_target(invoked) -> None:
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket="inbox-bucket")
    s3.put_bucket_notification_configuration(
        Bucket="inbox-bucket", NotificationConfiguration={"EventBridgeConfiguration": {}}
    )
    events = boto3.client("events", region_name=REGION)
    pattern = {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"object": {"key": [{"prefix": "inbox/"}]}},
    }
    events.put_rule(Name="inbox", EventPattern=json.dumps(pattern))
    events.put_targets(Rule="inbox", Targets=[{"Id": "f", "Arn": FUNCTION}])
    s3.put_object(Bucket="inbox-bucket", Key="inbox/t/trg/a.txt", Body=b"a")
    s3.put_object(Bucket="inbox-bucket", Key="work/elsewhere.txt", Body=b"b")
    ((_, event),) = invoked
    assert event["detail"]["object"]["key"] == "inbox/t/trg/a.txt"
