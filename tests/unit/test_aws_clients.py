"""The platform's boto3 clients: one session's model cache for all of them, each signed as its own principal."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from longhaul.adapters import aws


@pytest.fixture(autouse=True)
def fresh_clients() -> Iterator[None]:
    aws.clear_clients()
    yield
    aws.clear_clients()


def test_clients_of_two_roles_share_the_sdks_models_and_sign_as_their_own_role() -> None:
    alpha = aws._client("s3", None, ("AKIAALPHA", "secret-a", ""))
    beta = aws._client("s3", None, ("AKIABETA", "secret-b", "token-b"))

    assert alpha is not beta
    # one loader: a service's model is read and parsed once, not once per role (a second per function locally)
    assert alpha._loader is beta._loader
    signed = [c._request_signer._credentials.get_frozen_credentials() for c in (alpha, beta)]
    assert [(s.access_key, s.token) for s in signed] == [("AKIAALPHA", None), ("AKIABETA", "token-b")]
    assert aws._client("s3", None, ("AKIAALPHA", "secret-a", "")) is alpha  # kept per principal
