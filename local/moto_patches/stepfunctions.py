"""Step Functions: state machines created by CloudFormation run in the interpreter, executions are named like AWS's,
a Map run's executions are not listed, each attempt of a callback Task gets its own token, what every execution
would parse or build again (definitions, JSONPaths, boto3 clients) is made once, and versions and aliases deploy from
CloudFormation and start executions."""

from __future__ import annotations

import functools
import random
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from local.moto_patches.core import _define, _module, _original, _replace, _restore


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


#: What the replaced `start_execution` adds to upstream's: `names` (a UUID for an unnamed execution), `versions` (a
#: version or alias ARN starts that version). Each patch switches its own on; the method is upstream's again once
#: neither is on.
_START_FEATURES: set[str] = set()


def _start_execution(self: Any, state_machine_arn: str, name: str | None = None, *args: Any, **kwargs: Any) -> Any:
    original = _original(_parser_backend_class(), "start_execution")
    if "names" in _START_FEATURES:
        name = name or str(uuid.uuid4())
    if "versions" not in _START_FEATURES:
        return original(self, state_machine_arn, name, *args, **kwargs)
    machine_arn, version_arn, alias_arn = _resolve_qualifier(self, state_machine_arn)
    execution = original(self, version_arn or state_machine_arn, name, *args, **kwargs)
    if version_arn is not None:
        execution.state_machine_arn = machine_arn  # DescribeExecution names the machine, and the version beside it
        execution.longhaul_version_arn = version_arn
        execution.longhaul_alias_arn = alias_arn
    return execution


def _install_start(feature: str) -> None:
    _START_FEATURES.add(feature)
    _replace(_parser_backend_class(), "start_execution", _start_execution)


def _uninstall_start(feature: str) -> None:
    _START_FEATURES.discard(feature)
    if not _START_FEATURES:
        _restore(_parser_backend_class(), "start_execution")


def _parser_backend_class() -> type:
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    return StepFunctionsParserBackend


def name_executions_like_aws() -> None:
    """Give an unnamed execution a UUID name, as AWS does.

    The executing backend uses the missing name as is: every unnamed execution is called `None`, so the
    second unnamed `StartExecution` of a state machine fails with `ExecutionAlreadyExists`.
    """
    _install_start("names")


def unname_executions() -> None:
    _uninstall_start("names")


# --- Step Functions: a Map run's executions ----------------------------------------------------------------


def _list_executions(self: Any) -> Any:
    from moto.stepfunctions.exceptions import ResourceNotFound
    from moto.stepfunctions.responses import StepFunctionResponse

    if self._get_param("mapRunArn") and not self._get_param("stateMachineArn"):
        raise ResourceNotFound(self._get_param("mapRunArn"))
    return _original(StepFunctionResponse, "list_executions")(self)


def refuse_map_run_listings() -> None:
    """`ListExecutions(mapRunArn=...)` answers `ResourceNotFound` (a 400) instead of a server error.

    moto's interpreter keeps no child executions of a Distributed Map, and its `list_executions` reads only
    `stateMachineArn`: with a map run's ARN it concatenates `None` into a message and the server answers 500, which
    botocore retries and the server prints as a traceback. The cost model asks for a job's map-run children (they
    are billed on AWS); locally it now hears at once that there are none to list and marks its count estimated.
    """
    from moto.stepfunctions.responses import StepFunctionResponse

    _replace(StepFunctionResponse, "list_executions", _list_executions)


def list_map_runs_like_upstream() -> None:
    from moto.stepfunctions.responses import StepFunctionResponse

    _restore(StepFunctionResponse, "list_executions")


def _callback_state_class() -> type:
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback import (
        StateTaskServiceCallback,
    )

    return StateTaskServiceCallback


def _callback_eval_execution(self: Any, env: Any) -> None:
    """`StateTaskServiceCallback._eval_execution` (one attempt), with a fresh task token for every retry."""
    context = env.states.context_object.context_object_data
    token = (context.get("Task") or {}).get("Token")
    endpoint = env.callback_pool_manager.get(token) if token else None
    if endpoint is not None and getattr(endpoint, "longhaul_attempted", False):
        endpoint = env.callback_pool_manager.add(env.states.context_object.update_task_token())
    if endpoint is not None:
        endpoint.longhaul_attempted = True
    _original(_callback_state_class(), "_eval_execution")(self, env)


def token_per_attempt() -> None:
    """Give each attempt of a `.waitForTaskToken` Task its own task token, as AWS does.

    Upstream makes the token once per state entry and every Retry attempt waits on the same callback endpoint: once
    a worker has answered `SendTaskFailure`, each retry finds that outcome at once and fails without waiting for its
    own worker (and a timed-out worker could answer for the retry). Now a retry gets a new token and endpoint.
    """
    _replace(_callback_state_class(), "_eval_execution", _callback_eval_execution)


def share_token_across_attempts() -> None:
    _restore(_callback_state_class(), "_eval_execution")


# --- Step Functions definitions: parsed once, shared by every execution -----------------------------------

#: How many distinct definitions keep their parsed program (a deployment has a handful; `reset()` redeploys the same).
DEFINITION_CACHE_SIZE = 64
_DEFINITIONS: OrderedDict[str, tuple[Any, Any]] = OrderedDict()  # definition text -> (program, parse tree)
_DEFINITIONS_LOCK = threading.Lock()
_PARSING: dict[str, threading.Lock] = {}  # definition text -> held while it is parsed (one parse per text)


def _asl_parser_class() -> type:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    return AmazonStateLanguageParser


def evaluation_components(root: Any) -> Iterator[Any]:
    """Every evaluation component (`EvalComponent`) reachable from `root`, a parsed program or part of one, once."""
    from moto.stepfunctions.parser.asl.component.component import Component
    from moto.stepfunctions.parser.asl.component.eval_component import EvalComponent

    seen: set[int] = set()
    pending: list[Any] = [root]
    while pending:
        value = pending.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, EvalComponent):
            yield value
        if isinstance(value, Component):
            pending.extend(vars(value).values())
        elif isinstance(value, list | tuple | set | frozenset):
            pending.extend(value)
        elif isinstance(value, dict):
            pending.extend(value.values())


def _fix_heap_keys(component: Any) -> None:
    """Give every evaluation component of `component` its `heap_key` now, before threads share it.

    Upstream draws a component's key lazily (`EvalComponent.heap_key`: the first reader stores a new uid): two
    executions reading it at once could each draw one and then look up a Retry's attempt counter in
    `env.heap` under the other's key. Drawn once here, every execution reads the same key (the counters
    themselves live in each execution's own `env.heap`).
    """
    for evaluated in evaluation_components(component):
        _ = evaluated.heap_key


def _cached_parse(definition: str) -> tuple[Any, Any]:
    """`AmazonStateLanguageParser.parse`, once per definition text; later calls return the same (program, tree)."""
    with _DEFINITIONS_LOCK:
        found = _DEFINITIONS.get(definition)
        if found is not None:
            _DEFINITIONS.move_to_end(definition)
            return found
        parsing = _PARSING.setdefault(definition, threading.Lock())
    with parsing:  # concurrent first executions of one definition wait for a single parse
        with _DEFINITIONS_LOCK:
            found = _DEFINITIONS.get(definition)
        if found is not None:
            return found
        try:
            program, tree = _original(_asl_parser_class(), "parse")(definition)  # an invalid one raises: not cached
            _fix_heap_keys(program)
            with _DEFINITIONS_LOCK:
                _DEFINITIONS[definition] = (program, tree)
                while len(_DEFINITIONS) > DEFINITION_CACHE_SIZE:
                    _DEFINITIONS.popitem(last=False)
        finally:
            with _DEFINITIONS_LOCK:
                _PARSING.pop(definition, None)
        return program, tree


def forget_parsed_definitions() -> None:
    """Empty the cache of `parse_definitions_once` (tests)."""
    with _DEFINITIONS_LOCK:
        _DEFINITIONS.clear()


def parse_definitions_once() -> None:
    """Parse a state machine definition once and share its program between executions.

    Upstream parses the definition text again (ANTLR lexer, parser, then the preprocessor that builds the program of
    evaluation components) at `CreateStateMachine` and at every `StartExecution`, in the execution's thread: about
    0.35 s of CPU for the document-analysis definition (38 KB), which under a burst of submissions competes for the
    interpreter lock with the API itself. The program is safe to share: its components hold only what the
    definition says; everything an execution changes lives in its `Environment` (states, heap of Retry counters,
    frames, Map run records, callback endpoints), created per execution. The one lazily drawn value, each
    component's `heap_key`, is drawn at parse time (`_fix_heap_keys`). Keyed by the exact text (an updated
    definition is a new text, so it is parsed anew), bounded to `DEFINITION_CACHE_SIZE` texts.
    """
    _replace(_asl_parser_class(), "parse", staticmethod(_cached_parse))


def parse_definitions_every_time() -> None:
    _restore(_asl_parser_class(), "parse")
    forget_parsed_definitions()


# --- Step Functions paths and clients: parsed once, created once ---------------------------------------------

#: JSONPath texts kept parsed (a deployment's definitions hold a few hundred distinct paths).
JSON_PATH_CACHE_SIZE = 4096
_JSON_PATH_MODULES = (
    "moto.stepfunctions.parser.asl.utils.json_path",  # InputPath, Parameters' "x.$", OutputPath, ItemsPath, Choice
    "moto.stepfunctions.parser.asl.component.common.path.result_path",  # ResultPath
)


def parse_json_paths_once() -> None:
    """Parse each JSONPath text once, not at every evaluation.

    Upstream calls `jsonpath_ng.parse` (and its `ext` variant) every time a state reads or writes a path: each call
    builds a new PLY parser (`yacc`), about 1 ms of CPU, several times per state of every execution: 6% of the
    platform's CPU in a burst of submissions. A parsed path is a tree of immutable nodes (`find`,
    `update_or_create` build new values, never change the tree), so one parse per text serves every execution.
    """
    for name in _JSON_PATH_MODULES:
        module = _module(name)
        _replace(module, "parse", functools.lru_cache(maxsize=JSON_PATH_CACHE_SIZE)(_original(module, "parse")))


def parse_json_paths_every_time() -> None:
    for name in _JSON_PATH_MODULES:
        _restore(_module(name), "parse")


_BOTO_CLIENT_USERS = (
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.item_reader.eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.result_writer.resource_eval.resource_eval_s3",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_aws_sdk",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_dynamodb",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_ecs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_events",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sns",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sqs",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_unsupported",
)
#: Connections one shared client keeps per host: a Map's items and concurrent executions call at once.
BOTO_CLIENT_POOL = 64
_BOTO_CLIENTS: dict[tuple[str, str, bool, int, str], Any] = {}
_BOTO_CLIENTS_LOCK = threading.Lock()
#: The access key upstream's interpreter signs with; it passes unchecked (`iam.enforce_iam`) only for calls made
#: outside a state's evaluation (none of the platform's), since a state's calls are signed as the machine's role.
INTERPRETER_ACCESS_KEY = "ak"
_STATE_ROLE = threading.local()  # the role of the execution whose state this thread evaluates


def _shared_boto_client(region: str, service: str, state_credentials: Any = None) -> Any:
    """Upstream's `boto_client_for` (same endpoint, timeouts, no retries), one client per region, service, endpoint
    and principal, with a connection pool for concurrent callers. A state's calls are signed with its state
    machine's role (`run_state_calls_as_the_machine_role`), as Step Functions makes them on AWS."""
    import boto3
    from botocore.config import Config
    from moto.core.models import botocore_stubber
    from moto.settings import moto_server_port
    from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds

    from local.moto_patches.iam import is_enforcing, role_credentials

    role = getattr(_STATE_ROLE, "arn", None) if is_enforcing() else None
    credentials = role_credentials(role, session="states") if role else None
    access_key = credentials.access_key_id if credentials else INTERPRETER_ACCESS_KEY
    intercepting = bool(botocore_stubber.enabled)
    key = (region, service, intercepting, int(moto_server_port()), access_key)
    with _BOTO_CLIENTS_LOCK:
        client = _BOTO_CLIENTS.get(key)
        if client is None:
            client = boto3.client(
                aws_access_key_id=access_key,
                region_name=region,
                service_name=service,
                aws_secret_access_key=credentials.secret_access_key if credentials else "sk",
                aws_session_token=credentials.session_token if credentials else None,
                config=Config(
                    parameter_validation=False,
                    retries={"max_attempts": 0, "total_max_attempts": 1},
                    connect_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                    read_timeout=TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS,
                    max_pool_connections=BOTO_CLIENT_POOL,
                ),
                **({} if intercepting else {"endpoint_url": f"http://localhost:{moto_server_port()}"}),
            )
            _BOTO_CLIENTS[key] = client
    return client


#: The states whose evaluation calls AWS (Tasks, and a Map's item reader and result writer), by module and class.
_STATES_THAT_CALL = (
    ("moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda", "StateTaskLambda"),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service", "StateTaskService"),
    ("moto.stepfunctions.parser.asl.component.state.exec.state_map.state_map", "StateMap"),
)


def _as_the_machine_role(evaluate: Any) -> Any:
    @functools.wraps(evaluate)
    def wrapper(self: Any, env: Any) -> Any:
        previous = getattr(_STATE_ROLE, "arn", None)
        details = getattr(env, "aws_execution_details", None)
        _STATE_ROLE.arn = getattr(details, "role_arn", None) or previous
        try:
            return evaluate(self, env)
        finally:
            _STATE_ROLE.arn = previous

    return wrapper


def run_state_calls_as_the_machine_role() -> None:
    """Sign each state's AWS calls (Lambda invokes, SQS, ECS, Step Functions, S3 item readers) with the credentials
    of its execution's role, so IAM enforcement (`iam.enforce_iam`) checks the state machine's own grants.

    Upstream signs every call with a fixed dummy key. `_eval_execution` runs a state's work in the thread that makes
    the calls (a Task's timeout thread included), so the role is kept per thread for its duration.
    """
    for module_name, class_name in _STATES_THAT_CALL:
        owner = getattr(_module(module_name), class_name)
        _replace(owner, "_eval_execution", _as_the_machine_role(_original(owner, "_eval_execution")))


def run_state_calls_unsigned() -> None:
    for module_name, class_name in _STATES_THAT_CALL:
        _restore(getattr(_module(module_name), class_name), "_eval_execution")


def share_interpreter_clients() -> None:
    """Create the interpreter's AWS client for a region and service once, not for every Task.

    Upstream's `boto_client_for` builds a new boto3 client (a session, the service model, an endpoint resolver) for
    every Lambda invocation, SDK integration, item reader and result writer: about 5 ms of CPU per Task, 5% of the
    platform's CPU in a burst of submissions. botocore clients are thread-safe; each Task's call is stateless (the
    interpreter passes no per-execution credentials here), so one client per region, service and endpoint serves
    them all.
    """
    for name in _BOTO_CLIENT_USERS:
        _replace(_module(name), "boto_client_for", _shared_boto_client)


def create_interpreter_clients_every_time() -> None:
    for name in _BOTO_CLIENT_USERS:
        _restore(_module(name), "boto_client_for")
    with _BOTO_CLIENTS_LOCK:
        _BOTO_CLIENTS.clear()


# --- Step Functions versions and aliases: deployed by CloudFormation, started by ARN ----------------------------


def _machine_models() -> tuple[type, type, type]:
    from moto.stepfunctions.models import StateMachine, StateMachineAlias, StateMachineVersion

    return StateMachine, StateMachineVersion, StateMachineAlias


def _backend(account_id: str, region_name: str) -> Any:
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    return stepfunctions_parser_backends[account_id][region_name]


def _split_qualified(arn: str) -> tuple[str, str | None]:
    """`…:stateMachine:<name>[:<version or alias>]` → (the machine's ARN, the qualifier or None)."""
    parts = arn.split(":")
    return (":".join(parts[:7]), parts[7]) if len(parts) == 8 else (arn, None)


def _resolve_qualifier(backend: Any, arn: str) -> tuple[str, str | None, str | None]:
    """(machine ARN, version ARN, alias ARN) of what `arn` names: a version starts itself; an alias starts one of the
    versions it routes to, drawn by their weights."""
    machine_arn, qualifier = _split_qualified(arn)
    if qualifier is None:
        return arn, None, None
    if qualifier.isdigit():
        return machine_arn, arn, None
    alias = backend.describe_state_machine_alias(arn)
    routes = alias.routing_configuration
    chosen = random.choices(routes, weights=[float(r.get("weight", 100)) for r in routes])[0]
    return machine_arn, str(chosen["stateMachineVersionArn"]), arn


def _publish_sharing_executions(self: Any, description: str | None) -> None:
    """`StateMachine.publish`, with the version sharing its machine's executions and backend: an execution of a
    version is one of the machine's (its ARN names the machine; names are unique per machine)."""
    StateMachine, _, _ = _machine_models()
    _original(StateMachine, "publish")(self, description)
    version = self.latest_version
    version.executions = self.executions
    version.backend = self.backend


def _describe_execution_with_versions(self: Any) -> Any:
    from moto.stepfunctions.responses import StepFunctionResponse

    result = _original(StepFunctionResponse, "describe_execution")(self)
    execution = self.stepfunction_backend.describe_execution(self._get_param("executionArn"))
    version_arn = getattr(execution, "longhaul_version_arn", None)
    if version_arn is not None:
        result.result["stateMachineArn"] = execution.state_machine_arn
        result.result["stateMachineVersionArn"] = version_arn
        alias_arn = getattr(execution, "longhaul_alias_arn", None)
        if alias_arn is not None:
            result.result["stateMachineAliasArn"] = alias_arn
    return result


def start_executions_on_versions() -> None:
    """`StartExecution` with a version ARN runs that version's definition, with an alias ARN one of the versions the
    alias routes to; `DescribeExecution` names the version (and alias) it started on, as AWS does.

    Upstream looks the ARN up among machines and versions only (an alias is `StateMachineDoesNotExist`), and a version
    cannot start at all: it lacks the machine's name check (`AttributeError`, a server error), its executions would be
    its own (`DescribeExecution` of the execution ARN, which names the machine, finds nothing) and the response never
    says which version ran.
    """
    StateMachine, StateMachineVersion, _ = _machine_models()
    from moto.stepfunctions.responses import StepFunctionResponse

    _install_start("versions")
    _replace(StateMachine, "publish", _publish_sharing_executions)
    _define(
        StateMachineVersion, "_handle_name_input_idempotency", StateMachine.__dict__["_handle_name_input_idempotency"]
    )
    _replace(StepFunctionResponse, "describe_execution", _describe_execution_with_versions)


def start_executions_on_machines_only() -> None:
    StateMachine, StateMachineVersion, _ = _machine_models()
    from moto.stepfunctions.responses import StepFunctionResponse

    _restore(StepFunctionResponse, "describe_execution")
    _restore(StateMachineVersion, "_handle_name_input_idempotency")
    _restore(StateMachine, "publish")
    _uninstall_start("versions")


def _retained(cloudformation_json: dict[str, Any], policy: str) -> bool:
    return cloudformation_json.get(policy) == "Retain"


def _version_create(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **_: Any
) -> Any:
    """`AWS::StepFunctions::StateMachineVersion`: publish the machine's current revision."""
    properties = cloudformation_json["Properties"]
    machine = _backend(account_id, region_name).describe_state_machine(properties["StateMachineArn"])
    machine.publish(description=properties.get("Description"))
    return machine.latest_version


def _version_update(
    cls: Any,
    /,
    original_resource: Any,
    new_resource_name: str,
    cloudformation_json: dict[str, Any],
    account_id: str,
    region_name: str,
) -> Any:
    """Any change of a version's properties replaces it: a new version; the old one stays if the update keeps it."""
    replacement = _version_create(cls, new_resource_name, cloudformation_json, account_id, region_name)
    if not _retained(cloudformation_json, "UpdateReplacePolicy"):
        _delete_version(_backend(account_id, region_name), original_resource.arn)
    return replacement


def _version_delete(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
) -> None:
    if resource_name and not _retained(cloudformation_json, "DeletionPolicy"):
        _delete_version(_backend(account_id, region_name), resource_name)


def _delete_version(backend: Any, version_arn: str) -> None:
    """DeleteStateMachineVersion: refused while an alias routes to it (AWS's `ConflictException`)."""
    from moto.core.exceptions import AWSError

    machine_arn, qualifier = _split_qualified(version_arn)
    machine = next((m for m in backend.state_machines if m.arn == machine_arn), None)
    if machine is None or qualifier is None or not qualifier.isdigit():
        return
    for alias in machine.aliases.values():
        if any(r.get("stateMachineVersionArn") == version_arn for r in alias.routing_configuration):
            message = f"Version {version_arn} can't be deleted because alias {alias.arn} routes to it"
            raise AWSError(message, exception_type="ConflictException")
    machine.versions.pop(int(qualifier), None)


def _routing(properties: dict[str, Any]) -> list[dict[str, Any]]:
    """An alias's routing from its CloudFormation properties (`RoutingConfiguration`, or a deployment preference's
    target version, reached at once)."""
    if properties.get("RoutingConfiguration"):
        return [
            {"stateMachineVersionArn": r["StateMachineVersionArn"], "weight": int(r["Weight"])}
            for r in properties["RoutingConfiguration"]
        ]
    target = properties["DeploymentPreference"]["StateMachineVersionArn"]
    return [{"stateMachineVersionArn": target, "weight": 100}]


def _alias_create(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **_: Any
) -> Any:
    properties = cloudformation_json["Properties"]
    return _backend(account_id, region_name).create_state_machine_alias(
        properties.get("Name", resource_name), _routing(properties), properties.get("Description")
    )


def _alias_update(
    cls: Any,
    /,
    original_resource: Any,
    new_resource_name: str,
    cloudformation_json: dict[str, Any],
    account_id: str,
    region_name: str,
) -> Any:
    properties = cloudformation_json["Properties"]
    return _backend(account_id, region_name).update_state_machine_alias(
        original_resource.arn, properties.get("Description"), _routing(properties)
    )


def _alias_delete(
    cls: Any, /, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str
) -> None:
    if resource_name:
        _backend(account_id, region_name).delete_state_machine_alias(resource_name)


def _arn_attribute(self: Any, attribute: str) -> Any:
    from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

    if attribute == "Arn":
        return self.arn
    raise UnformattedGetAttTemplateException()


def _list_state_machine_versions(self: Any) -> Any:
    """ListStateMachineVersions (newest first; one page)."""
    from moto.core.responses import ActionResult

    machine = self.stepfunction_backend.describe_state_machine(self._get_param("stateMachineArn"))
    versions = sorted(machine.versions.values(), key=lambda v: v.version, reverse=True)
    return ActionResult(
        {"stateMachineVersions": [{"stateMachineVersionArn": v.arn, "creationDate": v.creation_date} for v in versions]}
    )


def _delete_state_machine_version(self: Any) -> Any:
    from moto.core.responses import ActionResult

    _delete_version(self.stepfunction_backend, self._get_param("stateMachineVersionArn"))
    return ActionResult({})


_MODEL_METHODS = (
    "cloudformation_type",
    "cloudformation_name_type",
    "create_from_cloudformation_json",
    "update_from_cloudformation_json",
    "delete_from_cloudformation_json",
    "physical_resource_id",
    "has_cfn_attr",
    "get_cfn_attribute",
)
_VERSION_ACTIONS = ("list_state_machine_versions", "delete_state_machine_version")


def _forget_resource_types() -> None:
    """moto's CloudFormation caches its map of resource types; it is read again after a change of the models."""
    from moto.cloudformation import parsing

    for cached in (parsing.get_model_list, parsing.get_model_map, parsing.get_name_type_map):
        cached.cache_clear()


def deploy_state_machine_versions() -> None:
    """Deploy `AWS::StepFunctions::StateMachineVersion` and `AWS::StepFunctions::StateMachineAlias` from CloudFormation
    (`Ref` = ARN, `Fn::GetAtt Arn`, a retained version kept), and answer ListStateMachineVersions and
    DeleteStateMachineVersion.

    Upstream models versions and aliases for the API only: neither class names a resource type (a template with one
    fails with an unknown type), and the API lacks the two actions an operator prunes old versions with.
    """
    _, StateMachineVersion, StateMachineAlias = _machine_models()
    from moto.stepfunctions.responses import StepFunctionResponse

    for cls, kind, create, update, delete in (
        (StateMachineVersion, "StateMachineVersion", _version_create, _version_update, _version_delete),
        (StateMachineAlias, "StateMachineAlias", _alias_create, _alias_update, _alias_delete),
    ):
        _define(cls, "cloudformation_type", staticmethod(lambda kind=kind: f"AWS::StepFunctions::{kind}"))
        _define(cls, "cloudformation_name_type", staticmethod(lambda: ""))
        _define(cls, "create_from_cloudformation_json", classmethod(create))
        _define(cls, "update_from_cloudformation_json", classmethod(update))
        _define(cls, "delete_from_cloudformation_json", classmethod(delete))
        _define(cls, "physical_resource_id", property(lambda self: self.arn))
        _define(cls, "has_cfn_attr", classmethod(lambda cls, attribute: attribute == "Arn"))
        _define(cls, "get_cfn_attribute", _arn_attribute)
    _define(StepFunctionResponse, "list_state_machine_versions", _list_state_machine_versions)
    _define(StepFunctionResponse, "delete_state_machine_version", _delete_state_machine_version)
    _forget_resource_types()


def undeploy_state_machine_versions() -> None:
    _, StateMachineVersion, StateMachineAlias = _machine_models()
    from moto.stepfunctions.responses import StepFunctionResponse

    for cls in (StateMachineVersion, StateMachineAlias):
        for name in _MODEL_METHODS:
            _restore(cls, name)
    for name in _VERSION_ACTIONS:
        _restore(StepFunctionResponse, name)
    _forget_resource_types()


# --- a Map iteration that fails with a `States.` error keeps it ----------------------------------------------

_ITERATION_WORKER = "moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.iteration_worker"


def _iteration_error_name(error_name: str | None) -> Any:
    """`CustomErrorName` for the names a state machine raises; a `States.` name (a Task's `States.Timeout`, an
    iteration's `States.TaskFailed` …) is kept as the runtime error it is, not refused."""
    from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
    from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName

    if error_name is not None and error_name.startswith("States."):
        return ErrorName(error_name=error_name)
    return CustomErrorName(error_name)


def keep_iteration_error_names() -> None:
    """A Map iteration that ends in an error named `States.…` fails the Map with that error, as on AWS.

    Upstream wraps an iteration's error name in `CustomErrorName`, whose constructor refuses the `States.` prefix
    (reserved for names a state machine may not *raise*): the `ValueError` ends the Map with `States.Runtime`,
    "Custom Error Names MUST NOT begin with the prefix 'States.'", whatever the iteration's error was (an uncaught
    `States.Timeout`, say), and a Catch on `States.Timeout` around the Map never matches.
    """
    _replace(_module(_ITERATION_WORKER), "CustomErrorName", _iteration_error_name)


def refuse_iteration_error_names() -> None:
    _restore(_module(_ITERATION_WORKER), "CustomErrorName")
