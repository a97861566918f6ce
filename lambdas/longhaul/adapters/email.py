"""E-mail through Amazon SES (API v2, `SendEmail`): the `Mailer` port of agents' e-mail tools.

The sender is the stack's SES identity (`LONGHAUL_EMAIL_SENDER`); each message is tagged with the operation id of
the tool call that sent it (`longhaul:operation`), so a message can be traced to its effect in the job's outbox.
SES's errors map to the typed errors: throttling and 5xx are transient, a sender the account may not use (not
verified, sending paused, the sandbox refusing a recipient) is the deployment's to fix, a malformed address is the
input's.
"""

from __future__ import annotations

import re
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from longhaul.core.errors import InvalidInputError, PlatformConfigurationError, TransientError

TRANSIENT = frozenset({"TooManyRequestsException", "LimitExceededException", "ThrottlingException"})
MISCONFIGURED = frozenset(
    {"MessageRejected", "MailFromDomainNotVerifiedException", "AccountSuspendedException", "SendingPausedException"}
)
TAG_VALUE = re.compile(r"[^A-Za-z0-9_.-]")


class SesMailer:
    def __init__(self, client: Any, sender: str) -> None:
        self._client = client
        self.sender = sender

    def send(self, *, to: str, subject: str, body: str, operation_id: str) -> str:
        try:
            response = self._client.send_email(
                FromEmailAddress=self.sender,
                Destination={"ToAddresses": [to]},
                Content={
                    "Simple": {
                        "Subject": {"Data": subject, "Charset": "UTF-8"},
                        "Body": {"Text": {"Data": body, "Charset": "UTF-8"}},
                    }
                },
                EmailTags=[{"Name": "longhaul-operation", "Value": TAG_VALUE.sub("_", operation_id)[:256]}],
            )
        except ClientError as error:
            code = str(error.response.get("Error", {}).get("Code", ""))
            status = int(error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in TRANSIENT or status >= 500:
                raise TransientError(f"SES {code}: retryable") from None
            if code in MISCONFIGURED:
                raise PlatformConfigurationError(
                    f"SES refused to send from {self.sender} ({code}): verify that identity in SES in this region "
                    "(and request production access to send to unverified recipients)"
                ) from None
            raise InvalidInputError(f"SES {code}: the message to {to} was refused") from None
        except BotoCoreError as error:
            raise TransientError(f"SES {type(error).__name__}") from None
        message_id: str = response["MessageId"]
        return message_id
