"""Webhooks end to end below the state machine: the outbox row commits with the status change, one attempt signs
and sends it to a real HTTP receiver on 127.0.0.1, failures (5xx, a redirect) are recorded on the job's `callback`
without touching its status, and the dead letter names what to redeliver. Secrets come from moto's Secrets Manager.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import timedelta

import boto3
import pytest

from longhaul.adapters.secrets import SecretsManagerWebhookSecrets
from longhaul.core.addresses import parse_allowlist
from longhaul.core.contracts import JobStatus
from longhaul.core.errors import WebhookDeliveryFailed, WebhookUndeliverable
from longhaul.core.settings import Settings
from longhaul.services import Services
from longhaul.storage.jobs import NewJob
from longhaul.webhooks import dispatcher
from longhaul.webhooks.signing import new_secret, verify
from tests.unit.aws_env import REGION
from tests.unit.conftest import FakeClock
from tests.unit.fakes import FakeDispatch
from tests.unit.receiver import receiver
from tests.unit.test_sweep import read

S = JobStatus
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
PREFIX = "Longhaul-test/webhooks/"


@pytest.fixture
def secrets(services: Services) -> SecretsManagerWebhookSecrets:
    store = SecretsManagerWebhookSecrets(
        boto3.client("secretsmanager", region_name=REGION), PREFIX, clock=services.jobs.clock
    )
    store.put("tenant-a", SECRET)
    return store


def with_callbacks(services: Services, secrets: SecretsManagerWebhookSecrets, allow: str = "") -> Services:
    dispatch = FakeDispatch()
    settings = Settings.model_validate(
        {**services.settings.model_dump(by_alias=True), "LONGHAUL_CALLBACK_ALLOWLIST": allow}
    )
    services.jobs.on_outbox = lambda webhook: dispatch.start(webhook.webhook_id, webhook.job_id)
    return dataclasses.replace(services, settings=settings, dispatch=dispatch, webhook_secrets=secrets)


def submit(services: Services, url: str, n: int = 1) -> str:
    jid = f"job_{n:028x}"
    services.jobs.create_job(
        NewJob(
            jid,
            "tenant-a",
            "document-analysis",
            f"work/{jid}/input.json",
            "h",
            "offline:test",
            30,
            callback_url=url,
            links_base="https://api.example.test/prod",
        )
    )
    return jid


def test_the_final_status_writes_its_webhook_in_the_same_transaction(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    s = with_callbacks(services, secrets)
    jid = submit(s, "https://hooks.example.com/longhaul")

    s.jobs.transition(jid, S.RUNNING, event="job_started")  # no webhook for this change
    s.jobs.transition(jid, S.COMPLETED, event="job_completed")

    job = read(s.jobs, jid)
    assert job.callback is not None and job.callback.status == "pending" and job.callback.event == "job.completed"
    record = s.outbox.get(job.callback.webhook_id)
    assert record is not None and json.loads(record.body)["data"] == {
        "job_id": jid,
        "workflow": "document-analysis",
        "status": "completed",
        "links": {
            "job": f"https://api.example.test/prod/v1/jobs/{jid}",
            "events": f"https://api.example.test/prod/v1/jobs/{jid}/events",
            "result": f"https://api.example.test/prod/v1/jobs/{jid}/result",
        },
    }
    assert s.dispatch is not None and list(s.dispatch.started) == [record.webhook_id]  # type: ignore[attr-defined]


def test_a_delivery_is_signed_with_the_tenants_secret_and_recorded(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    with receiver() as hook:
        s = with_callbacks(services, secrets, allow=hook.origin)
        jid = submit(s, f"{hook.origin}/receive")
        s.jobs.transition(jid, S.CANCELLED, event="job_cancelled")
        webhook_id = read(s.jobs, jid).callback.webhook_id  # type: ignore[union-attr]

        outcome = dispatcher.deliver({"webhook_id": webhook_id, "job_id": jid}, s)

    (request,) = hook.received
    assert outcome["status"] == "delivered" and request.path == "/receive"
    assert verify(request.body, request.headers, SECRET, now=s.now()) == webhook_id
    assert json.loads(request.body)["type"] == "job.cancelled" and "result" not in json.loads(request.body)["data"]
    callback = read(s.jobs, jid).callback
    assert callback is not None and (callback.status, callback.attempts) == ("delivered", 1)


def test_a_failing_receiver_is_retried_with_the_same_id_and_never_changes_the_job(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    with receiver(status=500) as hook:
        s = with_callbacks(services, secrets, allow=hook.origin)
        jid = submit(s, f"{hook.origin}/receive")
        s.jobs.transition(jid, S.EXPIRED, event="job_expired")
        webhook_id = read(s.jobs, jid).callback.webhook_id  # type: ignore[union-attr]
        for _ in range(3):
            with pytest.raises(WebhookDeliveryFailed, match="HTTP 500"):
                dispatcher.deliver({"webhook_id": webhook_id, "job_id": jid}, s)
        letter = dispatcher.dead_letter({"webhook_id": webhook_id, "job_id": jid, "error": "WebhookDeliveryFailed"}, s)

    assert {r.headers["webhook-id"] for r in hook.received} == {webhook_id} and len(hook.received) == 3
    job = read(s.jobs, jid)
    assert job.status == S.EXPIRED
    assert job.callback is not None and (job.callback.status, job.callback.attempts) == ("dead", 3)
    assert job.callback.last_error == "HTTP 500"
    assert letter["redeliver"]["path"] == f"/v1/ops/webhooks/{webhook_id}/redeliver" and letter["origin"] == hook.origin
    assert [r.webhook_id for r in dispatcher.dead_webhooks(s, limit=10)] == [webhook_id]
    again = dispatcher.redeliver(s, webhook_id)
    assert again is not None and (again.status, again.attempts, again.redeliveries) == ("pending", 0, 1)
    assert f"{webhook_id}-r1" in s.dispatch.started  # type: ignore[union-attr]


def test_a_redirect_is_a_failed_attempt_and_is_not_followed(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    with receiver() as internal, receiver(status=302, location="http://169.254.169.254/latest/meta-data/") as hook:
        hook.location = f"{internal.origin}/internal"  # an address the receiver would like us to reach
        s = with_callbacks(services, secrets, allow=f"{hook.origin},{internal.origin}")
        jid = submit(s, f"{hook.origin}/receive")
        s.jobs.transition(jid, S.FAILED, event="job_failed")
        webhook_id = read(s.jobs, jid).callback.webhook_id  # type: ignore[union-attr]

        with pytest.raises(WebhookDeliveryFailed, match="302"):
            dispatcher.deliver({"webhook_id": webhook_id, "job_id": jid}, s)

    assert len(hook.received) == 1 and internal.received == []


def test_at_delivery_the_host_is_resolved_again_and_a_forbidden_answer_is_refused(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    s = with_callbacks(services, secrets)
    jid = submit(s, "https://rebinding.example.com/hook")  # public when submitted
    s.jobs.transition(jid, S.FAILED, event="job_failed")
    webhook_id = read(s.jobs, jid).callback.webhook_id  # type: ignore[union-attr]

    def rebound(host: str, port: int) -> Sequence[str]:
        return ["127.0.0.1"]

    with pytest.raises(WebhookDeliveryFailed, match="refused"):
        dispatcher.deliver({"webhook_id": webhook_id, "job_id": jid}, s, resolver=rebound)


def test_a_tenant_without_a_secret_is_undeliverable_at_once(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    s = with_callbacks(services, secrets)
    jid = submit(s, "https://hooks.example.com/h")
    s.jobs.transition(jid, S.FAILED, event="job_failed")
    record = s.outbox.get(read(s.jobs, jid).callback.webhook_id)  # type: ignore[union-attr]
    assert record is not None
    s.outbox.table.update_item(
        Key={"pk": f"OUTBOX#{record.webhook_id}", "sk": "OUTBOX"},
        UpdateExpression="SET tenant_id = :t",
        ExpressionAttributeValues={":t": "tenant-without-secret"},
    )

    with pytest.raises(WebhookUndeliverable):
        dispatcher.deliver({"webhook_id": record.webhook_id, "job_id": jid}, s)


def test_a_rotated_secret_keeps_signing_during_its_grace_period(
    secrets: SecretsManagerWebhookSecrets, clock: FakeClock
) -> None:
    fresh = secrets.rotate("tenant-a", secret=new_secret())

    in_grace = secrets.signing_secrets("tenant-a")
    clock.advance(timedelta(hours=25))
    after = secrets.signing_secrets("tenant-a")

    assert in_grace == [fresh, SECRET] and after == [fresh]


def test_the_allowlist_setting_is_read_from_its_variable() -> None:
    settings = Settings.model_validate(
        {"LONGHAUL_TABLE": "t", "LONGHAUL_BUCKET": "b", "LONGHAUL_CALLBACK_ALLOWLIST": "http://127.0.0.1:9000"}
    )
    assert settings.callback_allowlist == parse_allowlist("http://127.0.0.1:9000")


def test_a_late_attempt_never_reopens_a_webhook_that_was_dead_lettered(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    # Given a webhook whose receiver hangs: an attempt has read the webhook and is still waiting for an answer
    s = with_callbacks(services, secrets)
    jid = submit(s, "https://hooks.example.com/h")
    s.jobs.transition(jid, S.FAILED, event="job_failed")
    webhook_id = read(s.jobs, jid).callback.webhook_id  # type: ignore[union-attr]
    in_flight = s.outbox.get(webhook_id)
    assert in_flight is not None
    # while the delivery gives up on it (its Task timed out on every retry) and dead-letters it
    s.outbox.attempted(in_flight, delivered=False, error="timed out")
    dispatcher.dead_letter({"webhook_id": webhook_id, "job_id": jid, "error": "States.Timeout"}, s)

    # When the hung attempt finally ends, failed or even delivered
    late_failure = s.outbox.attempted(in_flight, delivered=False, error="read timed out")
    late_success = s.outbox.attempted(in_flight, delivered=True)

    # Then nothing changes: the webhook and the job's view of it stay dead, with the attempts counted before
    assert (late_failure, late_success) == (False, False)
    record = s.outbox.get(webhook_id)
    assert record is not None and (record.status, record.attempts) == ("dead", 1)
    callback = read(s.jobs, jid).callback
    assert callback is not None and (callback.status, callback.attempts) == ("dead", 1)
    # and another attempt of the same delivery sends nothing
    assert dispatcher.deliver({"webhook_id": webhook_id, "job_id": jid}, s)["status"] == "dead"


def test_a_delivered_webhook_is_never_marked_dead_by_a_late_give_up(
    services: Services, secrets: SecretsManagerWebhookSecrets
) -> None:
    s = with_callbacks(services, secrets)
    jid = submit(s, "https://hooks.example.com/h")
    s.jobs.transition(jid, S.CANCELLED, event="job_cancelled")
    record = s.outbox.get(read(s.jobs, jid).callback.webhook_id)  # type: ignore[union-attr]
    assert record is not None
    assert s.outbox.attempted(record, delivered=True)

    assert s.outbox.dead(record, "gave up") is False

    fresh = s.outbox.get(record.webhook_id)
    assert fresh is not None and fresh.status == "delivered"
    callback = read(s.jobs, jid).callback
    assert callback is not None and callback.status == "delivered"


@pytest.mark.parametrize(
    "event",
    [
        {"webhook_id": "msg_00000000000000000000000000", "job_id": "job_x"},  # no such webhook
        {"job_id": "job_x"},
        {"webhook_id": ["msg"], "job_id": None},
        {"webhook_id": "x" * 5000, "job_id": "job_x"},
    ],
)
def test_a_delivery_that_carries_no_webhook_is_poison_dead_lettered_at_once(
    services: Services, secrets: SecretsManagerWebhookSecrets, event: dict[str, object]
) -> None:
    s = with_callbacks(services, secrets)

    # An attempt is undeliverable at once (never retried)
    with pytest.raises(WebhookUndeliverable):
        dispatcher.deliver(event, s)
    # and its failure path always produces a dead letter that says what it was
    letter = dispatcher.dead_letter({**event, "error": "WebhookUndeliverable"}, s)

    assert letter["poison"] is True and letter["reason"]
    assert letter["job_id"] in (event.get("job_id"), None)
