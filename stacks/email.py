"""E-mail: the SES identity agents' e-mail tools send from (`longhaul:email_sender`), and its grants.

On a first deploy SES sends a verification message to that address (or, for a domain, publishes the DKIM records to
add); until it is verified, sends fail as `platform-misconfigured` naming it. A new account's SES is in the sandbox:
it sends only to verified recipients until production access is granted. Locally the in-memory SES creates the
identity from the template (`local/moto_patches/ses.py`) and keeps every message (`sent_messages`).
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from aws_cdk import aws_ses as ses
from constructs import Construct

DEFAULT_SENDER = "notices@example.com"


class Email(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, sender: str) -> None:
        super().__init__(scope, construct_id)
        self.sender = sender
        identity = ses.Identity.email(sender) if "@" in sender else ses.Identity.domain(sender)
        self.identity = ses.EmailIdentity(self, "Sender", identity=identity)

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """`ses:SendEmail` from this identity only."""
        self.identity.grant_send_email(grantee)
