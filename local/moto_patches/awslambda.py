"""Lambda: an invocation runs the function's handler in this process (`local.lambda_runtime`), and a version that
CloudFormation publishes is referenced by its ARN."""

from __future__ import annotations

from typing import Any

from local.moto_patches.core import _define, _replace, _restore


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


# --- CloudFormation: a Lambda version is referenced by its ARN ---------------------------------------------------


def _version_create(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **_: Any
) -> Any:
    """`AWS::Lambda::Version`: publish the function's current code and configuration; keep the version's ARN."""
    from moto.awslambda.utils import get_backend

    properties = cloudformation_json["Properties"]
    published = get_backend(account_id, region_name).publish_version(
        properties["FunctionName"], properties.get("Description", "")
    )
    assert published is not None, f"no function {properties['FunctionName']} to publish"
    version = cls({"Version": published.version})
    version.function_arn = published.function_arn
    return version


def _version_attribute(self: Any, attribute: str) -> Any:
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    if attribute == "Version":
        return str(self.version)
    if attribute == "FunctionArn":
        return self.function_arn
    raise UnformattedGetAttTemplateException()


def _version_delete(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
) -> None:
    """Delete the version (the cleanup of a stack update keeps a retained one, as CloudFormation does)."""
    from moto.awslambda.utils import get_backend

    if resource_name:
        get_backend(account_id, region_name).delete_function(resource_name)


def reference_lambda_versions() -> None:
    """Give an `AWS::Lambda::Version` created by CloudFormation its ARN as `Ref` (and `Version`, `FunctionArn`).

    Upstream's `LambdaVersion` has no physical id, so `{"Ref": version}` resolves to the Python object (a state machine
    definition that invokes it names the logical id) and `Fn::GetAtt` fails; deleting one does nothing.
    """
    from moto.awslambda.models import LambdaVersion

    _define(LambdaVersion, "create_from_cloudformation_json", classmethod(_version_create))
    _define(LambdaVersion, "delete_from_cloudformation_json", classmethod(_version_delete))
    _define(LambdaVersion, "physical_resource_id", property(lambda self: self.function_arn))
    _define(LambdaVersion, "has_cfn_attr", classmethod(lambda cls, attribute: attribute in ("Version", "FunctionArn")))
    _define(LambdaVersion, "get_cfn_attribute", _version_attribute)


def unreference_lambda_versions() -> None:
    from moto.awslambda.models import LambdaVersion

    for name in (
        "create_from_cloudformation_json",
        "delete_from_cloudformation_json",
        "physical_resource_id",
        "has_cfn_attr",
        "get_cfn_attribute",
    ):
        _restore(LambdaVersion, name)
