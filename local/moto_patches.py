"""Every change Longhaul makes to moto (5.2.5) lives here; each is small, documented and idempotent.

`apply()` installs all of them, `revert()` restores moto's own behaviour (used by the tests that pin the
upstream behaviour each patch works around). Patches replace module attributes or methods; the originals
are kept in `_ORIGINALS` the first time and never overwritten, so applying twice is harmless.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

from moto.core.config import DefaultConfig

_ORIGINALS: dict[tuple[int, str], tuple[object, Any]] = {}
_MISSING = object()

#: moto user configuration the runtime needs: execute state machines, run Lambda without Docker.
RUNTIME_CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}


def _replace(owner: object, name: str, value: object) -> None:
    _ORIGINALS.setdefault((id(owner), name), (owner, getattr(owner, name, _MISSING)))
    setattr(owner, name, value)


def _restore(owner: object, name: str) -> None:
    saved = _ORIGINALS.pop((id(owner), name), None)
    if saved is not None and saved[1] is not _MISSING:
        setattr(owner, name, saved[1])


_CONFIG_BEFORE: dict[str, Any] = {}


def enable_execution() -> None:
    """Turn on moto's Step Functions interpreter and the Docker-free Lambda backend.

    Without it, moto's Step Functions backend records executions but never runs them, and Lambda tries Docker.
    """
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    runtime: dict[str, Any] = RUNTIME_CONFIG  # type: ignore[assignment]
    for section, values in runtime.items():
        _CONFIG_BEFORE.setdefault(section, copy.deepcopy(config.get(section, {})))
        config.setdefault(section, {}).update(values)


def disable_execution() -> None:
    from moto.core.config import default_user_config

    config: dict[str, Any] = default_user_config  # type: ignore[assignment]
    for section, values in _CONFIG_BEFORE.items():
        config[section] = values
    _CONFIG_BEFORE.clear()


def _stepfunctions_modules() -> list[object]:
    import moto.stepfunctions.models

    return [moto.stepfunctions.models]


def route_state_machines_to_interpreter() -> None:
    """Make CloudFormation-created state machines land in the executing (parser) backend.

    `StateMachine.create_from_cloudformation_json` uses the module global `stepfunctions_backends`, the
    non-executing backend, while the API (with `execute_state_machine`) reads `stepfunctions_parser_backends`:
    the stack's machines would be invisible to `start_execution`. Only the models module is rebound: the
    package attribute `moto.stepfunctions.stepfunctions_backends` must stay, the server derives its URL map
    from that backend's module, and `responses.get_backend` already picks the parser backend by config.
    """
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    for module in _stepfunctions_modules():
        _replace(module, "stepfunctions_backends", stepfunctions_parser_backends)


def unroute_state_machines() -> None:
    for module in _stepfunctions_modules():
        _restore(module, "stepfunctions_backends")


def _start_execution_with_generated_name(
    self: Any, state_machine_arn: str, name: str | None = None, *args: Any, **kwargs: Any
) -> Any:
    original = _ORIGINALS[(id(_parser_backend_class()), "start_execution")][1]
    return original(self, state_machine_arn, name or str(uuid.uuid4()), *args, **kwargs)


def _parser_backend_class() -> type:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    return StepFunctionsParserBackend


def name_executions_like_aws() -> None:
    """Give an unnamed execution a UUID name, as AWS does.

    The executing backend uses the missing name as is: every unnamed execution is called `None`, so the
    second unnamed `StartExecution` of a state machine fails with `ExecutionAlreadyExists`.
    """
    _replace(_parser_backend_class(), "start_execution", _start_execution_with_generated_name)


def unname_executions() -> None:
    _restore(_parser_backend_class(), "start_execution")


def run_lambdas_in_process() -> None:
    """Replace the Docker-free Lambda backend's canned `invoke` with a real in-process call of the handler.

    moto's `LambdaSimpleBackend.invoke` echoes the request body; `local.lambda_runtime.invoke` imports the
    function's handler from the repository and runs it (see that module).
    """
    from moto.awslambda_simple.models import LambdaSimpleBackend

    from local.lambda_runtime import invoke

    _replace(LambdaSimpleBackend, "invoke", invoke)


def stop_running_lambdas_in_process() -> None:
    from moto.awslambda_simple.models import LambdaSimpleBackend

    _restore(LambdaSimpleBackend, "invoke")


def apply() -> None:
    """Install every patch (idempotent)."""
    enable_execution()
    route_state_machines_to_interpreter()
    name_executions_like_aws()
    run_lambdas_in_process()


def revert() -> None:
    """Restore moto's own behaviour (idempotent)."""
    stop_running_lambdas_in_process()
    unname_executions()
    unroute_state_machines()
    disable_execution()


def is_applied() -> bool:
    return bool(_ORIGINALS)
