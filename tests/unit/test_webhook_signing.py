"""Standard Webhooks signatures: what the platform signs, the reference verifier accepts; a tampered body, another
secret, a stale or future timestamp are rejected; during a rotation both secrets sign."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from local.deploy import wait_until
from longhaul.webhooks.signing import VerificationFailed, new_secret, sign, signature, verify

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
BODY = b'{"type":"job.completed","data":{"job_id":"job_1","status":"completed"}}'
ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def headers(secrets: list[str], *, at: datetime = NOW, webhook_id: str = "msg_1") -> dict[str, str]:
    return sign(secrets, webhook_id, int(at.timestamp()), BODY)


def test_the_signature_is_the_standard_webhooks_reference_value() -> None:
    """The example of the Standard Webhooks specification (its reference libraries' test vector)."""
    body = b'{"test": 2432232314}'
    expected = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert signature(SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body) == expected


def test_a_signed_delivery_verifies_and_names_its_id() -> None:
    assert verify(BODY, headers([SECRET]), SECRET, now=NOW) == "msg_1"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda h, b: (h, b.replace(b"completed", b"failed")),  # body
        lambda h, b: ({**h, "webhook-id": "msg_2"}, b),  # id
        lambda h, b: ({**h, "webhook-timestamp": str(int(h["webhook-timestamp"]) + 1)}, b),  # timestamp
        lambda h, b: ({**h, "webhook-signature": "v1,AAAA"}, b),
        lambda h, b: ({**h, "webhook-signature": h["webhook-signature"].replace("v1,", "v2,")}, b),
        lambda h, b: ({k: v for k, v in h.items() if k != "webhook-signature"}, b),
    ],
)
def test_a_tampered_delivery_is_rejected(tamper) -> None:  # type: ignore[no-untyped-def]
    tampered_headers, tampered_body = tamper(headers([SECRET]), BODY)
    with pytest.raises(VerificationFailed):
        verify(tampered_body, tampered_headers, SECRET, now=NOW)


def test_another_secret_does_not_verify() -> None:
    with pytest.raises(VerificationFailed, match="no signature"):
        verify(BODY, headers([SECRET]), new_secret(), now=NOW)


@pytest.mark.parametrize(("offset", "message"), [(-301, "too old"), (301, "future")])
def test_stale_and_future_timestamps_are_rejected(offset: int, message: str) -> None:
    signed = headers([SECRET], at=NOW + timedelta(seconds=offset))
    with pytest.raises(VerificationFailed, match=message):
        verify(BODY, signed, SECRET, now=NOW)


def test_within_the_tolerance_a_delivery_verifies() -> None:
    assert verify(BODY, headers([SECRET], at=NOW - timedelta(seconds=299)), SECRET, now=NOW) == "msg_1"


def test_during_a_rotation_both_secrets_sign_and_either_verifies() -> None:
    old, fresh = SECRET, new_secret()
    signed = headers([fresh, old])

    assert len(signed["webhook-signature"].split()) == 2
    assert verify(BODY, signed, old, now=NOW) == "msg_1"
    assert verify(BODY, signed, fresh, now=NOW) == "msg_1"


def test_the_sample_receiver_saves_a_delivery_that_the_command_verifies(tmp_path: Path) -> None:
    """`samples/webhook_receiver.py` (the README's receiver) keeps the delivery as received: `longhaul verify-webhook`
    verifies its saved HTTP message."""
    import socket
    import urllib.request

    from typer.testing import CliRunner

    from longhaul_client.cli import app

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    saved = tmp_path / "hooks"
    server = subprocess.Popen(["python3", str(ROOT / "samples" / "webhook_receiver.py"), str(port), str(saved)])
    try:
        signed = headers([SECRET], at=datetime.now(UTC))
        request = urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=BODY, headers=signed, method="POST")

        def delivered() -> int | None:  # None until the receiver listens
            try:
                return int(urllib.request.urlopen(request, timeout=5).status)
            except OSError:
                return None

        assert wait_until(delivered, timeout=10, interval=0.1, what="the sample receiver") == 204
        verified = CliRunner().invoke(app, ["verify-webhook", str(saved / "last.http"), "--secret", SECRET])
        assert verified.exit_code == 0, verified.output
        assert verified.stdout.strip() == "msg_1" and (saved / "msg_1.body").read_bytes() == BODY
    finally:
        server.terminate()
        server.wait(timeout=10)
