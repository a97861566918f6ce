"""SES: CloudFormation creates the template's `AWS::SES::EmailIdentity`.

moto's SES (v1 and v2) sends e-mail only from a verified identity and keeps every message it sends, but its
CloudFormation has no model of `AWS::SES::EmailIdentity`: it skips the resource with a warning, so the stack's
sender would not exist (every send `MessageRejected`) and a `Ref` to it would render as its logical id. The patch
gives CloudFormation a model for that one type, creating and deleting the identity in moto's SES backend (where
identities need no verification round trip), its `Ref` the identity as AWS's is.
"""

from __future__ import annotations

from typing import Any

from local.moto_patches.core import _module, _original, _replace, _restore

EMAIL_IDENTITY = "AWS::SES::EmailIdentity"


class EmailIdentityResource:
    """What moto's CloudFormation needs of a resource model, for an SES identity (not a `CloudFormationModel`
    subclass: moto lists those once and for good, and the patch must be revertible)."""

    def __init__(self, identity: str, account_id: str, region_name: str) -> None:
        self.identity = identity
        self.account_id = account_id
        self.region_name = region_name

    @property
    def physical_resource_id(self) -> str:
        return self.identity

    def is_created(self) -> bool:
        return True

    @staticmethod
    def cloudformation_type() -> str:
        return EMAIL_IDENTITY

    @staticmethod
    def cloudformation_name_type() -> str:
        return "EmailIdentity"

    @classmethod
    def has_cfn_attr(cls, attr: str) -> bool:
        return False

    @classmethod
    def create_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **_: Any
    ) -> EmailIdentityResource:
        from moto.ses.models import ses_backends

        identity = str(cloudformation_json["Properties"]["EmailIdentity"])
        ses_backends[account_id][region_name].create_email_identity_v2(identity, None, None, None)
        return cls(identity, account_id, region_name)

    @classmethod
    def update_from_cloudformation_json(
        cls, original_resource: Any, new_resource_name: str, cloudformation_json: dict[str, Any], account_id: str,
        region_name: str,
    ) -> EmailIdentityResource:  # fmt: skip
        original_resource.delete(account_id, region_name)
        return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)

    @classmethod
    def delete_from_cloudformation_json(
        cls, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
    ) -> None:
        cls(str(cloudformation_json["Properties"]["EmailIdentity"]), account_id, region_name).delete(
            account_id, region_name
        )

    def delete(self, account_id: str, region_name: str) -> None:
        from moto.ses.models import ses_backends

        ses_backends[account_id][region_name].email_identities.pop(self.identity, None)


def _resource_class_from_type(resource_type: str) -> Any:
    if resource_type == EMAIL_IDENTITY:
        return EmailIdentityResource
    return _original(_module("moto.cloudformation.parsing"), "resource_class_from_type")(resource_type)


def create_email_identities() -> None:
    """Let CloudFormation create (and delete) `AWS::SES::EmailIdentity` resources."""
    _replace(_module("moto.cloudformation.parsing"), "resource_class_from_type", _resource_class_from_type)


def skip_email_identities() -> None:
    _restore(_module("moto.cloudformation.parsing"), "resource_class_from_type")
