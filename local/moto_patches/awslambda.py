"""Lambda: an invocation runs the function's handler in this process (`local.lambda_runtime`)."""

from __future__ import annotations

from local.moto_patches.core import _replace, _restore


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
