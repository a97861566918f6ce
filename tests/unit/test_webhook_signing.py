"""Standard Webhooks signatures: what the platform signs, the reference verifier accepts; a tampered body, another
secret, a stale or future timestamp are rejected; during a rotation both secrets sign."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from longhaul.webhooks.signing import VerificationFailed, new_secret, sign, signature, verify

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
BODY = b'{"type":"job.completed","data":{"job_id":"job_1","status":"completed"}}'
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


def test_the_command_verifies_a_delivery_and_rejects_a_tampered_one(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    signed = headers([SECRET], at=now)
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    command = [
        sys.executable,
        "-m",
        "longhaul.webhooks.verify",
        "--secret",
        SECRET,
        "--id",
        signed["webhook-id"],
        "--timestamp",
        signed["webhook-timestamp"],
        "--signature",
        signed["webhook-signature"],
    ]
    env = {"PYTHONPATH": str(ROOT / "lambdas"), "PATH": "/usr/bin:/bin"}

    accepted = subprocess.run([*command, "--body", str(body)], capture_output=True, text=True, env=env, check=False)
    rejected = subprocess.run(command, input=BODY + b" ", capture_output=True, env=env, check=False)

    assert accepted.returncode == 0 and accepted.stdout.strip() == "msg_1"
    assert rejected.returncode == 1 and b"rejected" in rejected.stderr


def test_the_command_takes_the_received_headers_as_one_json_file(tmp_path: Path) -> None:
    signed = headers([SECRET], at=datetime.now(UTC))
    (tmp_path / "body").write_bytes(BODY)
    (tmp_path / "headers.json").write_text(json.dumps({"Content-Type": "application/json", **signed}))
    env = {"PYTHONPATH": str(ROOT / "lambdas"), "PATH": "/usr/bin:/bin"}
    command = [sys.executable, "-m", "longhaul.webhooks.verify", "--secret", SECRET, "--body", str(tmp_path / "body")]

    accepted = subprocess.run([*command, "--headers", str(tmp_path / "headers.json")], capture_output=True, env=env)
    incomplete = subprocess.run([*command, "--id", "msg_1"], capture_output=True, env=env)

    assert accepted.returncode == 0 and accepted.stdout.strip() == b"msg_1"
    assert incomplete.returncode == 2 and b"give --headers" in incomplete.stderr


def test_the_sample_receiver_saves_a_delivery_that_the_command_verifies(tmp_path: Path) -> None:
    """`samples/webhook_receiver.py` (the README's receiver) keeps the raw body and the headers as received."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    saved = tmp_path / "hooks"
    server = subprocess.Popen(["python3", str(ROOT / "samples" / "webhook_receiver.py"), str(port), str(saved)])
    try:
        signed = headers([SECRET], at=datetime.now(UTC))
        request = urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=BODY, headers=signed, method="POST")
        for _ in range(100):  # until it listens
            try:
                assert urllib.request.urlopen(request, timeout=5).status == 204
                break
            except OSError:
                time.sleep(0.1)
        env = {"PYTHONPATH": str(ROOT / "lambdas"), "PATH": "/usr/bin:/bin"}
        files = ["--headers", str(saved / "last.headers.json"), "--body", str(saved / "last.body")]
        verified = subprocess.run(
            [sys.executable, "-m", "longhaul.webhooks.verify", "--secret", SECRET, *files], capture_output=True, env=env
        )
        assert verified.returncode == 0, verified.stderr
        assert verified.stdout.strip() == b"msg_1" and (saved / "msg_1.body").read_bytes() == BODY
    finally:
        server.terminate()
        server.wait(timeout=10)
