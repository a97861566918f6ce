"""The platform's boto3 clients: one session's model cache for all of them, each signed as its own principal, each
built when an adapter first calls it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from longhaul.adapters import aws
from longhaul.adapters.ecs import EcsContainerTasks
from longhaul.core.settings import Env, Settings, function_environment
from longhaul.services import _build
from tests.unit.aws_env import offline_credentials


@pytest.fixture(autouse=True)
def fresh_clients(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    offline_credentials(monkeypatch)  # a region and keys: nothing here calls AWS
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


def test_a_lazy_client_is_built_on_first_use_signed_as_the_function_that_asked_for_it() -> None:
    with function_environment({"AWS_ACCESS_KEY_ID": "AKIALAZY", "AWS_SECRET_ACCESS_KEY": "s"}):
        lazy = aws.lazy_client("ecs")
    assert aws._client.cache_info().currsize == 0  # nothing built yet: an invocation that never calls ECS pays nothing

    assert lazy.meta.service_model.service_name == "ecs"  # built here, outside the asking function's environment
    built = aws._client("ecs", None, ("AKIALAZY", "s", ""))
    assert lazy._client is built  # the one client of that service and principal
    assert built._request_signer._credentials.get_frozen_credentials().access_key == "AKIALAZY"
    assert lazy.exceptions.ClusterNotFoundException is built.exceptions.ClusterNotFoundException


def test_the_services_build_no_client_before_a_call_needs_it() -> None:
    settings = Settings.model_validate(
        {Env.TABLE: "t", Env.BUCKET: "b", Env.CONTAINER_CLUSTER: "c", Env.EMAIL_SENDER: "a@example.com"}
    )
    wired = _build(settings)

    assert aws._client.cache_info().currsize == 0
    assert isinstance(wired.container_tasks, EcsContainerTasks) and wired.mailer is not None
