"""IAM: every request a role's credentials sign is authorized against that role's policies, on the resource it names.

moto (5.2.5) can authenticate requests (`INITIAL_NO_AUTH_ACTION_COUNT`), but its authorization is basic: for every
service but S3 and SQS the resource it checks is `*`, so a statement scoped to a table, a state machine or a function
never matches and a correctly granted call is refused as often as a missing one; an `Allow` whose `Condition` names
a key the request does not supply (CDK's `ecs:cluster`) applies as if it had none; presigned URLs (query-string
signatures) fail with a server error; and its 403 body is XML even for the JSON protocols, so botocore reports the
code `403`.

`enforce_iam(trusted)` replaces the check (`ActionAuthenticatorMixin._authenticate_and_authorize_action`):

- requests signed with a `trusted` access key pass (the platform itself, acting as the account's administrator:
  the deploy, the seeding, the tests' own inspection); so do moto's public operations;
- any other key must be an IAM user's or an assumed role's (STS), and its signature must match;
- the request is resolved into one or more (action, resource ARN, condition keys) — a `TransactWriteItems` is a
  `PutItem`/`UpdateItem`/`DeleteItem`/`ConditionCheckItem` on each item's table, as AWS authorizes it — and each must
  be allowed by an identity policy of the principal and denied by none (`evaluate`: `Action`/`NotAction`,
  `Resource`/`NotResource` with `*` and `?`, and the condition operators CDK writes, on the keys the request
  supplies (`ecs:cluster`; `dynamodb:LeadingKeys`, the partition key of each item a request names or a query on
  the table names; `s3:prefix`, a listing's prefix); a condition on
  a key the request does not supply does not match, so its `Allow` does not apply, except `ForAllValues`, which
  holds over no values as on AWS);
- a presigned URL past its expiry is refused as S3 refuses it (403 `AccessDenied`, "Request has expired");
- a refusal is AWS's own error for the protocol: `AccessDeniedException` (JSON protocols; HTTP 400, or 403 for
  Lambda), `AccessDenied` (S3, query protocols).

Resources are resolved for the services the platform's principals call (`RESOLVERS`: DynamoDB, S3, SQS, Step
Functions, Lambda, Secrets Manager, ECS, SES, SNS, STS, Bedrock's batch inference jobs, EventBridge and its
Scheduler); a principal's call to any other service is refused with a message saying so (grants for such services,
e.g. Bedrock's runtime, are checked against the code instead: README, "Least privilege").
- an assumed role's session policy (STS `Policy`) applies as on AWS: a request must be allowed by the role's
  policies and by the session policy (`_session_policy`); an `sts:AssumeRole` must also be allowed by the assumed
  role's trust policy (`_trusted_by`), and one with session tags needs `sts:TagSession` on the role.

Not evaluated: resource-based policies (bucket and queue policies; moto does not deploy them), permission boundaries,
SCPs, `iam:PassRole` (a call that passes a role is authorized on its own action only), a role's
`MaxSessionDuration` (moto issues what is asked).

`relax_iam()` restores moto's own check (and its `INITIAL_NO_AUTH_ACTION_COUNT` of infinity: no checks at all).
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from werkzeug.exceptions import HTTPException

from local.moto_patches.core import _replace, _restore

#: Condition keys a request supplies: {"ecs:cluster": "arn:…"}.
Conditions = Mapping[str, str]


@dataclass(frozen=True)
class Access:
    """One authorization a request needs: `action` (`dynamodb:PutItem`) on `resource` (an ARN, `*` for none)."""

    action: str
    resource: str
    conditions: Conditions = field(default_factory=dict)


@dataclass
class _State:
    enforcing: bool = False
    trusted: frozenset[str] = frozenset()
    denials: list[tuple[str, str, str]] = field(default_factory=list)  # (principal, action, resource), newest last
    allowed: dict[tuple[str, str], int] = field(default_factory=dict)  # (principal, action) -> requests allowed
    lock: threading.Lock = field(default_factory=threading.Lock)


_STATE = _State()
#: How many refusals `denials()` keeps (the newest).
DENIALS_KEPT = 200


def _mixin() -> type:
    from moto.core.authorization import ActionAuthenticatorMixin

    return ActionAuthenticatorMixin


def enforce_iam(trusted: Iterable[str]) -> None:
    """Authorize every request not signed by a `trusted` access key against its principal's policies."""
    _STATE.trusted = frozenset(trusted)
    _STATE.enforcing = True
    _replace(_mixin(), "_authenticate_and_authorize_action", _authorize)


def relax_iam() -> None:
    _STATE.enforcing = False
    _restore(_mixin(), "_authenticate_and_authorize_action")


def is_enforcing() -> bool:
    return _STATE.enforcing


def trust(*access_keys: str) -> None:
    """Add access keys that pass unchecked (the platform's own)."""
    _STATE.trusted = _STATE.trusted | frozenset(access_keys)


def denials() -> list[tuple[str, str, str]]:
    """The refusals so far (principal ARN, action, resource), oldest first: what a test or an operator looks at."""
    with _STATE.lock:
        return list(_STATE.denials)


def allowed() -> dict[tuple[str, str], int]:
    """How many requests of each (principal ARN, action) were checked and allowed so far."""
    with _STATE.lock:
        return dict(_STATE.allowed)


def clear_denials() -> None:
    with _STATE.lock:
        _STATE.denials.clear()
        _STATE.allowed.clear()


# --- the check ------------------------------------------------------------------------------------------------


def _authorize(self: Any, iam_request_cls: type, resource: str = "*") -> None:
    """Replacement for `ActionAuthenticatorMixin._authenticate_and_authorize_action` (see the module docstring)."""
    if not _STATE.enforcing:
        return
    from moto.core.authorization import ActionAuthenticatorMixin

    if self.headers.get("X-Amz-Target") in ActionAuthenticatorMixin.PUBLIC_OPERATIONS:
        return
    query = parse_qs(urlparse(self.uri).query)
    authorization = self.headers.get("Authorization") or ""
    credential = _between("Credential=", ",", authorization) if authorization else _first(query, "X-Amz-Credential")
    if not credential and _first(query, "AWSAccessKeyId"):  # a SigV2 presigned URL (S3)
        credential = f"{_first(query, 'AWSAccessKeyId')}/-/{getattr(self, 'region', 'us-east-1')}/s3/aws4_request"
    if not credential:
        _refuse(self, "anonymous", "", "*", "the request is not signed")
    access_key_id, _, scope = unquote(credential).partition("/")
    _refuse_expired(self, query)
    if access_key_id in _STATE.trusted:
        return
    parts = scope.split("/")
    region, service = (parts[1], parts[2]) if len(parts) >= 3 else ("us-east-1", "")
    try:
        principal = _principal(self, iam_request_cls, authorization, access_key_id, region)
    except HTTPException as error:
        if _is_json_protocol(self) and getattr(self, "service_name", "") != "s3":
            from moto.core.exceptions import JsonRESTError

            # What the JSON services answer an unknown key or a bad signature (moto's are XML, reported as "403").
            signature = "Signature" in type(error).__name__
            raise JsonRESTError(
                "InvalidSignatureException" if signature else "UnrecognizedClientException",
                "The request signature we calculated does not match the signature you provided."
                if signature
                else "The security token included in the request is invalid.",
            ) from error
        raise
    resolver = RESOLVERS.get(service)
    if resolver is None:
        _refuse(self, principal.arn, f"{service}:*", "*", f"the local platform cannot authorize {service} requests")
        return
    action = f"{IAM_PREFIXES.get(service, service)}:{_action_name(self)}"
    documents = tuple(_document_text(policy) for policy in principal.collect_policies())
    session = _session_policy(principal)
    accesses = resolver(self, action, resource, region)
    for access in accesses:
        named = _condition_keys(documents + session)  # only what a statement tests: the decision holds for any other
        conditions = tuple(sorted((k, v) for k, v in access.conditions.items() if k in named))
        if not _allows(documents, access.action, access.resource, conditions):
            _refuse(self, principal.arn, access.action, access.resource, "")
        if session and not _allows(session, access.action, access.resource, conditions):
            _refuse(self, principal.arn, access.action, access.resource, "not allowed by its session policy")
        if access.action == "sts:AssumeRole" and not _trusted_by(access.resource, principal):
            _refuse(self, principal.arn, access.action, access.resource, "the role's trust policy does not name it")
    with _STATE.lock:
        for access in accesses:
            counted = (principal.arn, access.action)
            _STATE.allowed[counted] = _STATE.allowed.get(counted, 0) + 1


def _refuse_expired(self: Any, query: Mapping[str, list[str]]) -> None:
    """A presigned URL (a SigV4 or SigV2 query signature) past its expiry is refused as S3 refuses it: 403
    `AccessDenied`, "Request has expired" (moto serves it for ever). Not a denial of a grant: not recorded as one."""
    signed, expires = _first(query, "X-Amz-Date"), _first(query, "X-Amz-Expires")
    until = _first(query, "Expires")  # SigV2: the epoch second it expires at
    if signed and expires.isdigit():
        try:
            ends = datetime.strptime(signed, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC) + timedelta(seconds=int(expires))
        except ValueError:
            return
    elif until.isdigit() and _first(query, "Signature"):
        ends = datetime.fromtimestamp(int(until), UTC)
    else:
        return
    if datetime.now(UTC) > ends:
        from moto.s3.exceptions import S3ClientError

        raise S3ClientError("AccessDenied", "Request has expired")


def _principal(self: Any, iam_request_cls: type, authorization: str, access_key_id: str, region: str) -> Any:
    """The IAM user or assumed role of the key; a header signature is verified (a presigned URL's is not)."""
    from moto.iam.access_control import CreateAccessKeyFailure, create_access_key
    from moto.utilities.utils import get_partition

    if authorization:
        path = self.raw_path + (f"?{urlparse(self.uri).query}" if urlparse(self.uri).query else "")
        # A request without a body is signed over an empty payload: moto hands some services' GETs (EventBridge
        # Scheduler's) their headers as `data`, which its check would sign instead.
        empty = not self.raw_body and self.method in ("GET", "HEAD", "DELETE")
        request = iam_request_cls(
            account_id=self.current_account,
            method=self.method,
            path=path,
            data=b"" if empty else self.data,
            body=self.raw_body,
            headers=self.headers,
            action=self._get_action(),
        )
        request.check_signature()
        return request._access_key
    headers = dict(self.headers)
    query = {k.lower(): v for k, v in parse_qs(urlparse(self.uri).query).items()}
    token = _first(query, "x-amz-security-token")
    if token:
        headers["X-Amz-Security-Token"] = token
    try:
        return create_access_key(
            account_id=self.current_account,
            partition=get_partition(region),
            access_key_id=access_key_id,
            headers=headers,
        )
    except CreateAccessKeyFailure:
        _refuse(self, access_key_id, "", "*", "the security token included in the request is invalid")
        raise  # unreachable: _refuse raises


def _session_policy(principal: Any) -> tuple[str, ...]:
    """The session policy an assumed role's credentials were issued with (STS `Policy`), as documents: () for none.
    Its effective permissions are the role's policies intersected with it (AWS's evaluation of session policies)."""
    if type(principal).__name__ != "AssumedRoleAccessKey":
        return ()
    from moto.sts.models import sts_backends

    assumed = sts_backends[principal.account_id][principal.partition].get_assumed_role_from_access_key(
        principal._access_key_id
    )
    policy = getattr(assumed, "policy", None) if assumed is not None else None
    return (policy if isinstance(policy, str) else json.dumps(policy),) if policy else ()


def _trusted_by(role_arn: str, principal: Any) -> bool:
    """Whether the trust policy of `role_arn` lets `principal` (a role's session, or a user) assume it: a statement
    allowing `sts:AssumeRole` to its role's ARN, its own ARN, its account (root or id) or `*`. A role moto does not
    know is left to STS (it answers for itself)."""
    from moto.iam.models import iam_backends

    backend = iam_backends[principal.account_id][principal.partition]
    try:
        role = backend.get_role_by_arn(role_arn)
    except Exception:
        return True
    owner = getattr(principal, "_owner_role_name", None)
    callers = {principal.arn, principal.account_id, f"arn:{principal.partition}:iam::{principal.account_id}:root", "*"}
    if owner:
        with contextlib.suppress(Exception):  # a role deleted meanwhile: its sessions are the callers named above
            callers.add(backend.get_role(owner).arn)
    document = role.assume_role_policy_document
    trust = json.loads(document) if isinstance(document, str) else dict(document)
    statements = trust.get("Statement", [])
    for statement in statements if isinstance(statements, list) else [statements]:
        if statement.get("Effect") != "Allow" or not _matches_any(statement.get("Action", []), "sts:AssumeRole",
                                                                  ignore_case=True):  # fmt: skip
            continue
        named = statement.get("Principal", {})
        aws = named.get("AWS", []) if isinstance(named, dict) else named
        if any(str(p) in callers for p in _as_list(aws)):
            return True
    return False


def _action_name(self: Any) -> str:
    name = self.data.get("Action") if isinstance(getattr(self, "data", None), dict) else None
    if isinstance(name, list):  # a query protocol's form, parsed into lists (SNS)
        name = name[0] if name else None
    return str(name or self._get_action())


def _document_text(policy: Any) -> str:
    """A policy's JSON document as text, whatever moto hands back (a managed `Policy`, a string, a dict)."""
    from moto.iam.models import Policy

    if isinstance(policy, Policy):
        text = next(v for v in policy.versions if v.is_default).document
    elif isinstance(policy, str):
        text = policy
    else:
        text = policy["policy_document"]
    return text if isinstance(text, str) else json.dumps(text, sort_keys=True)


@functools.lru_cache(maxsize=1024)
def _condition_keys(documents: tuple[str, ...]) -> frozenset[str]:
    """The condition keys the statements of `documents` test (a request's other keys cannot change a decision)."""
    named: set[str] = set()
    for text in documents:
        statements = dict(json.loads(text)).get("Statement", [])
        for statement in statements if isinstance(statements, list) else [statements]:
            for clauses in dict(statement.get("Condition") or {}).values():
                named.update(dict(clauses))
    return frozenset(named)


@functools.lru_cache(maxsize=16384)
def _allows(documents: tuple[str, ...], action: str, resource: str, conditions: tuple[tuple[str, str], ...]) -> bool:
    """`evaluate` of the policies whose documents are `documents`, remembered: a function's role makes the same few
    calls again and again, and its documents (every statement CDK granted it) were parsed and walked at each. The
    documents are the key, so a changed policy is evaluated anew; of a request's condition keys, only those a
    statement of the documents tests are (a job's partition key, which most roles' statements never test, would make
    every job's calls new)."""
    return evaluate([dict(json.loads(text)) for text in documents], Access(action, resource, dict(conditions)))


def _refuse(self: Any, principal: str, action: str, resource: str, why: str) -> None:
    from moto.core.exceptions import JsonRESTError, _RESTError

    with _STATE.lock:
        _STATE.denials.append((principal, action, resource))
        del _STATE.denials[:-DENIALS_KEPT]
    message = f"User: {principal} is not authorized to perform: {action} on resource: {resource}"
    if why:
        message += f" ({why})"
    service = getattr(self, "service_name", "") or ""
    if service == "s3":
        from moto.s3.exceptions import S3ClientError

        raise S3ClientError("AccessDenied", message)
    if _is_json_protocol(self):
        raise JsonRESTError("AccessDeniedException", message)  # HTTP 400, as DynamoDB, Step Functions, ECS answer
    if service in ("lambda", "awslambda", "sesv2"):  # REST-JSON: HTTP 403
        error = JsonRESTError("AccessDeniedException", message)
        error.code = 403
        raise error
    error_xml = _RESTError("AccessDenied", message)
    error_xml.code = 403
    raise error_xml


def _is_json_protocol(self: Any) -> bool:
    content_type = str(self.headers.get("Content-Type") or "")
    return bool(self.headers.get("X-Amz-Target")) or ("json" in content_type and "x-amz" in content_type)


def _between(first: str, second: str, text: str) -> str:
    return text.partition(first)[2].partition(second)[0]


def _first_value(value: Any) -> str:
    """A form field as a string (moto parses a query protocol's form into lists)."""
    if isinstance(value, list):
        return str(value[0]) if value else ""
    return str(value or "")


def _first(query: Mapping[str, list[str]], name: str) -> str:
    values = query.get(name) or []
    return values[0] if values else ""


# --- policy evaluation ----------------------------------------------------------------------------------------


def evaluate(policies: Iterable[Mapping[str, Any]], access: Access) -> bool:
    """Whether identity `policies` allow `access`: some statement allows it and none denies it."""
    allowed = False
    for policy in policies:
        statements = policy.get("Statement", [])
        for statement in statements if isinstance(statements, list) else [statements]:
            if not _applies(statement, access):
                continue
            if statement.get("Effect") == "Deny":
                return False
            allowed = True
    return allowed


def _applies(statement: Mapping[str, Any], access: Access) -> bool:
    if "Action" in statement:
        if not _matches_any(statement["Action"], access.action, ignore_case=True):
            return False
    elif "NotAction" in statement and _matches_any(statement["NotAction"], access.action, ignore_case=True):
        return False
    if "Resource" in statement:
        if not _resource_matches(statement["Resource"], access.resource):
            return False
    elif "NotResource" in statement and _resource_matches(statement["NotResource"], access.resource):
        return False
    return all(
        _condition_holds(operator, key, expected, access.conditions)
        for operator, clauses in dict(statement.get("Condition") or {}).items()
        for key, expected in dict(clauses).items()
    )


def _resource_matches(patterns: Any, resource: str) -> bool:
    # `*` as the resource: the call names none (e.g. ecs:ListTasks); only a statement on `*` covers it.
    if resource == "*":
        return any(p == "*" for p in _as_list(patterns))
    return _matches_any(patterns, resource, ignore_case=False)


def _matches_any(patterns: Any, value: str, *, ignore_case: bool) -> bool:
    return any(_glob(p, value, ignore_case=ignore_case) for p in _as_list(patterns))


def _glob(pattern: str, value: str, *, ignore_case: bool) -> bool:
    return _compiled_glob(pattern, ignore_case).fullmatch(value) is not None


@functools.lru_cache(maxsize=4096)
def _compiled_glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    """A policy's wildcard (`*`, `?`) as a regular expression, built once per pattern (every call is authorized)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, flags=re.IGNORECASE if ignore_case else 0)


def _as_list(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda a, e: a == e,
    "StringNotEquals": lambda a, e: a != e,
    "StringEqualsIgnoreCase": lambda a, e: a.lower() == e.lower(),
    "StringLike": lambda a, e: fnmatch.fnmatchcase(a, e),
    "StringNotLike": lambda a, e: not fnmatch.fnmatchcase(a, e),
    "ArnEquals": lambda a, e: _glob(e, a, ignore_case=False),
    "ArnLike": lambda a, e: _glob(e, a, ignore_case=False),
    "ArnNotEquals": lambda a, e: not _glob(e, a, ignore_case=False),
    "ArnNotLike": lambda a, e: not _glob(e, a, ignore_case=False),
    "Bool": lambda a, e: a.lower() == e.lower(),
}


def _condition_holds(operator: str, key: str, expected: Any, supplied: Conditions) -> bool:
    # A request supplies one value per key here (a DynamoDB item's partition key), so a set operator tests that one
    # value; `ForAllValues` over a key the request does not supply holds, as on AWS (an empty set).
    qualifier, _, operator = operator.rpartition(":")
    if_exists = operator.endswith("IfExists")
    base = operator.removesuffix("IfExists")
    test = _OPERATORS.get(base)
    actual = supplied.get(key)
    if actual is None:
        if qualifier == "ForAllValues":
            return True
        return if_exists or base.endswith("NotEquals") or base.endswith("NotLike")
    if test is None:
        return False  # an operator this check does not know never grants
    return any(test(actual, e) for e in _as_list(expected))


# --- resources of a request, per service ----------------------------------------------------------------------


def _body(self: Any) -> dict[str, Any]:
    params = getattr(self, "params", None)
    if isinstance(params, dict) and params:
        return params
    raw = self.raw_body if isinstance(self.raw_body, (bytes, str)) else b""
    try:
        parsed = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _arn(service: str, region: str, account: str, resource: str) -> str:
    from moto.utilities.utils import get_partition

    return f"arn:{get_partition(region)}:{service}:{region}:{account}:{resource}"


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
}


def _dynamodb(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    body = _body(self)

    def table(name: str, index: str | None = None) -> str:
        if name.startswith("arn:"):
            return name + (f"/index/{index}" if index else "")
        return _arn("dynamodb", region, self.current_account, f"table/{name}" + (f"/index/{index}" if index else ""))

    def leading_key(spec: Mapping[str, Any]) -> Conditions:
        """`dynamodb:LeadingKeys`: the partition key value of the item a request names."""
        key = spec.get("Key") or spec.get("Item") or {}
        name = _hash_key(self.current_account, region, str(spec.get("TableName") or ""))
        value = key.get(name) if name else None
        return {"dynamodb:LeadingKeys": str(next(iter(value.values())))} if isinstance(value, dict) and value else {}

    operation = action.split(":", 1)[1]
    if operation == "TransactWriteItems":
        return [
            Access(f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table(spec["TableName"]), leading_key(spec))
            for item in body.get("TransactItems", [])
            for kind, spec in item.items()
            if kind in _TRANSACT_ACTIONS
        ]
    if operation == "TransactGetItems":
        return [Access("dynamodb:GetItem", table(item["Get"]["TableName"])) for item in body.get("TransactItems", [])]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [Access(action, table(name)) for name in body.get("RequestItems", {})]
    if operation == "Query" and "TableName" in body and not body.get("IndexName"):
        return [Access(action, table(body["TableName"]), _queried_partition(self, region, body))]
    if "TableName" in body:
        return [Access(action, table(body["TableName"], body.get("IndexName")), leading_key(body))]
    return [Access(action, "*")]


_EQUALS = re.compile(r"(?P<name>[#\w.]+)\s*=\s*(?P<value>:[\w]+)")


def _queried_partition(self: Any, region: str, body: Mapping[str, Any]) -> Conditions:
    """`dynamodb:LeadingKeys` of a query on a table: the partition key value its key condition names."""
    name = _hash_key(self.current_account, region, str(body.get("TableName") or ""))
    names = dict(body.get("ExpressionAttributeNames") or {})
    values = dict(body.get("ExpressionAttributeValues") or {})
    for match in _EQUALS.finditer(str(body.get("KeyConditionExpression") or "")):
        if names.get(match["name"], match["name"]) == name and isinstance(values.get(match["value"]), dict):
            return {"dynamodb:LeadingKeys": str(next(iter(values[match["value"]].values())))}
    return {}


def _hash_key(account: str, region: str, table_name: str) -> str | None:
    """The partition key attribute of a table (None: no such table; the service answers that itself)."""
    from moto.dynamodb.models import dynamodb_backends

    try:
        table = dynamodb_backends[account][region].get_table(table_name.rsplit("/", 1)[-1])
    except Exception:
        return None
    return str(table.hash_key_attr) or None


def _s3(self: Any, action: str, resource: str, _region: str) -> list[Access]:
    # A listing (of objects or of their versions) supplies its prefix (`s3:prefix`: "" when it names none), as on AWS.
    if action in ("s3:ListBucket", "s3:ListBucketVersions"):
        prefix = (getattr(self, "querystring", None) or {}).get("prefix") or [""]
        return [Access(action, resource, {"s3:prefix": str(prefix[0])})]
    return [Access(action, resource)]


#: SQS authorizes a batch call as its single-message action (there is no `sqs:SendMessageBatch` permission).
_SQS_BATCH_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}


def _sqs(self: Any, action: str, resource: str, _region: str) -> list[Access]:
    return [Access(_SQS_BATCH_ACTIONS.get(action, action), resource)]


def _sts(self: Any, action: str, _resource: str, _region: str) -> list[Access]:
    if action == "sts:AssumeRole":
        role = str(_body(self).get("RoleArn") or _first_value(self.data.get("RoleArn")) or "*")
        tagged = any(str(k).startswith("Tags.member.") for k in dict(self.data or {}))
        # Session tags are authorized on the role too (`sts:TagSession`), as AWS does.
        return [Access(action, role)] + ([Access("sts:TagSession", role)] if tagged else [])
    return [] if action == "sts:GetCallerIdentity" else [Access(action, "*")]


def _stepfunctions(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    body = _body(self)
    for field_name in ("executionArn", "mapRunArn", "stateMachineArn", "stateMachineAliasArn", "activityArn"):
        if body.get(field_name):
            return [Access(action, str(body[field_name]))]
    if body.get("taskToken"):
        machine = _machine_of_token(str(body["taskToken"]))
        # A token no running execution holds is refused by the service itself (InvalidToken, TaskTimedOut).
        return [Access(action, machine)] if machine else []
    return [Access(action, "*")]


def _machine_of_token(token: str) -> str | None:
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    for account in list(stepfunctions_parser_backends.values()):
        for backend in list(account.values()):
            for machine in list(backend.state_machines):
                for execution in list(machine.executions):
                    worker = getattr(execution, "exec_worker", None)
                    pool = getattr(getattr(getattr(worker, "env", None), "callback_pool_manager", None), "_pool", {})
                    if token in pool:
                        return str(machine.arn)
    return None


_LAMBDA_PATH = re.compile(r"/20\d\d-\d\d-\d\d/functions/(?P<name>[^/]+)")


def _lambda(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    match = _LAMBDA_PATH.search(unquote(self.raw_path))
    if not match:
        return [Access(action, "*")]
    name = match["name"]
    qualifier = _first(parse_qs(urlparse(self.uri).query), "Qualifier")
    if not name.startswith("arn:"):
        name = _arn("lambda", region, self.current_account, f"function:{name}")
    if qualifier and name.count(":") == 6:
        name = f"{name}:{qualifier}"
    operation = action.split(":", 1)[1]
    if operation in ("Invoke", "InvokeAsync"):
        action = "lambda:InvokeFunction"
    return [Access(action, name)]


def _secretsmanager(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    secret_id = str(_body(self).get("SecretId") or "")
    if not secret_id:
        return [Access(action, "*")]
    if secret_id.startswith("arn:"):
        return [Access(action, secret_id)]
    from moto.secretsmanager.models import secretsmanager_backends

    try:
        arn = secretsmanager_backends[self.current_account][region].describe_secret(secret_id).arn
    except Exception:  # a missing secret: the service answers ResourceNotFound to a principal allowed to read it
        arn = _arn("secretsmanager", region, self.current_account, f"secret:{secret_id}-??????")
    return [Access(action, str(arn))]


def _ecs(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    body = _body(self)
    account = self.current_account
    cluster = str(body.get("cluster") or "default")
    cluster_arn = cluster if cluster.startswith("arn:") else _arn("ecs", region, account, f"cluster/{cluster}")
    conditions = {"ecs:cluster": cluster_arn}
    operation = action.split(":", 1)[1]
    if operation == "RunTask":
        definition = str(body.get("taskDefinition") or "")
        if not definition.startswith("arn:"):
            definition = _arn("ecs", region, account, f"task-definition/{definition}")
        return [Access(action, definition, conditions)]
    if operation in ("StopTask", "DescribeTasks"):
        tasks = body.get("tasks") or ([body["task"]] if body.get("task") else [])
        cluster_name = cluster_arn.rsplit("/", 1)[-1]
        return [
            Access(
                action,
                t if str(t).startswith("arn:") else _arn("ecs", region, account, f"task/{cluster_name}/{t}"),
                conditions,
            )
            for t in tasks
        ] or [Access(action, "*", conditions)]
    return [Access(action, "*", conditions)]


def _ses(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    """SES authorizes a send on the sender's identity: the address's own, else its domain's."""
    body = _body(self)
    data = getattr(self, "data", None)
    sender = str(body.get("FromEmailAddress") or (data.get("Source") if isinstance(data, dict) else "") or "")
    if not sender:
        return [Access(action, "*")]
    address = sender.rpartition("<")[2].rstrip(">").strip()
    from moto.ses.models import ses_backends

    try:
        identities = set(ses_backends[self.current_account][region].email_identities)
    except Exception:
        identities = set()
    identity = address if address in identities or not identities else address.partition("@")[2]
    return [Access(action, _arn("ses", region, self.current_account, f"identity/{identity}"))]


def _bedrock(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    """Bedrock's control plane as the batch lane calls it: a batch inference job on its ARN (one not created yet on
    the jobs' wildcard), and the Bedrock model it runs (the offline model is none: it has no ARN). The runtime
    (`Converse`) never reaches the local platform: the offline model answers in process."""
    from local.moto_patches.bedrock import _identifier

    account = self.current_account
    if action.endswith(":CreateModelInvocationJob"):
        accesses = [Access(action, _arn("bedrock", region, account, "model-invocation-job/*"))]
        model = str(_body(self).get("modelId") or "")
        if "." in model:  # a Bedrock model id (`anthropic.…`), not the offline model's name
            accesses.append(Access(action, f"arn:aws:bedrock:{region}::foundation-model/{model}"))
        return accesses
    return [Access(action, _identifier(str(self.path)))]


def _unscoped(self: Any, action: str, _resource: str, _region: str) -> list[Access]:
    return [Access(action, "*")]


_SCHEDULER_PATH = re.compile(r"^/(?P<kind>schedules|schedule-groups)/(?P<name>[^/?]+)")


def _scheduler(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    """EventBridge Scheduler authorizes a schedule's calls on `schedule/<group>/<name>` (the group from the body or
    the query, `default` when none), a group's on `schedule-group/<name>`."""
    match = _SCHEDULER_PATH.search(unquote(self.raw_path))
    if not match:
        return [Access(action, "*")]
    name = match["name"]
    if match["kind"] == "schedule-groups":
        return [Access(action, _arn("scheduler", region, self.current_account, f"schedule-group/{name}"))]
    group = str(_body(self).get("GroupName") or _first(parse_qs(urlparse(self.uri).query), "groupName") or "default")
    return [Access(action, _arn("scheduler", region, self.current_account, f"schedule/{group}/{name}"))]


def _events(self: Any, action: str, _resource: str, region: str) -> list[Access]:
    """EventBridge authorizes a rule's calls on `rule/[<bus>/]<name>` and `PutEvents` on each entry's bus."""
    body = _body(self)
    operation = action.split(":", 1)[1]

    def bus_name(value: Any) -> str:
        text = str(value or "default")
        return text.rsplit("/", 1)[-1] if text.startswith("arn:") else text

    if operation == "PutEvents":
        buses = {bus_name(entry.get("EventBusName")) for entry in body.get("Entries") or [] if isinstance(entry, dict)}
        return [
            Access(action, _arn("events", region, self.current_account, f"event-bus/{bus}"))
            for bus in sorted(buses or {"default"})
        ]
    rule = body.get("Rule") or body.get("Name")
    if not rule:
        return [Access(action, "*")]
    bus = bus_name(body.get("EventBusName"))
    prefix = "" if bus == "default" else f"{bus}/"
    return [Access(action, _arn("events", region, self.current_account, f"rule/{prefix}{rule}"))]


Resolver = Callable[[Any, str, str, str], list[Access]]
#: Services whose signing name (the credential scope's) is not their IAM actions' prefix.
IAM_PREFIXES = {"monitoring": "cloudwatch"}


#: The services whose requests are authorized on their resources (the ones the platform's principals call).
def _sns(self: Any, action: str, _resource: str, _region: str) -> list[Access]:
    """SNS authorizes a publish (and a topic's other calls) on the topic it names."""
    form = getattr(self, "data", None)
    query = form if isinstance(form, dict) and isinstance(form.get("TopicArn"), list) else {}
    topic = str(_first(query, "TopicArn") or _body(self).get("TopicArn") or "*")
    return [Access(action, topic)]


RESOLVERS: dict[str, Resolver] = {
    "dynamodb": _dynamodb,
    "s3": _s3,
    "sqs": _sqs,
    "sts": _sts,
    "states": _stepfunctions,
    "lambda": _lambda,
    "secretsmanager": _secretsmanager,
    "ecs": _ecs,
    "ses": _ses,
    "sns": _sns,  # an operator's escalation, published to the alarm topic
    "monitoring": _unscoped,  # CloudWatch metrics: no resource-level permissions on AWS either
    "bedrock": _bedrock,  # the control plane's batch inference jobs (the runtime never reaches the local platform)
    "scheduler": _scheduler,  # schedules and triggers: the API function's schedules and batch windows' timers
    "events": _events,  # job status changes and reviews put on the stack's bus; EventBridge triggers' rules
}


# --- a principal's credentials ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RoleCredentials:
    """What a Lambda sandbox or an ECS task gets for its role (`AWS_ACCESS_KEY_ID`, … in its environment)."""

    access_key_id: str
    secret_access_key: str
    session_token: str

    def environment(self) -> dict[str, str]:
        return {
            "AWS_ACCESS_KEY_ID": self.access_key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }


_CREDENTIALS: dict[str, RoleCredentials] = {}
_CREDENTIALS_LOCK = threading.Lock()
#: How long the local credentials of a role last (moto does not check it; Lambda's and ECS's are refreshed).
SESSION_SECONDS = 12 * 3600


def role_credentials(role_arn: str, *, session: str = "longhaul-local") -> RoleCredentials:
    """Credentials of `role_arn`, assumed once through moto's STS (in process: no request, no trust check, as the
    Lambda and ECS services assume a function's or a task's role)."""
    with _CREDENTIALS_LOCK:
        known = _CREDENTIALS.get(role_arn)
        if known is not None and _still_assumed(role_arn, known.access_key_id):
            return known
        from moto.sts.models import sts_backends
        from moto.utilities.utils import get_partition

        account = role_arn.split(":")[4]
        region = "us-east-1"
        assumed = sts_backends[account][get_partition(region)].assume_role(
            region_name=region,
            role_session_name=session,
            role_arn=role_arn,
            policy="",
            duration=SESSION_SECONDS,
            external_id="",
        )
        credentials = RoleCredentials(assumed.access_key_id, assumed.secret_access_key, assumed.session_token)
        _CREDENTIALS[role_arn] = credentials
        return credentials


def _still_assumed(role_arn: str, access_key_id: str) -> bool:
    """A reset of moto's backends forgets assumed roles: credentials from before it no longer authenticate."""
    from moto.sts.models import sts_backends

    account = role_arn.split(":")[4]
    return any(r.access_key_id == access_key_id for r in sts_backends[account]["aws"].assumed_roles)


def _original_check(mixin: type) -> Any:
    """moto's own `_authenticate_and_authorize_action` (the tests pin its source)."""
    from local.moto_patches.core import _original

    return _original(mixin, "_authenticate_and_authorize_action")
