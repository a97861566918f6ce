"""`LocalPlatform`: moto server + patches + synthesized stack + seeded API keys + front door, in one process.

    with LocalPlatform.start(repo_root) as platform:
        requests.post(platform.api_url + "/v1/jobs", headers=platform.auth_header("alpha"), ...)

moto's backends are process-global, so only one platform runs per process at a time. A test session starts
it once (session fixture) and calls `reset()` to get an empty, freshly deployed platform without restarting.
`start()` sets `AWS_ENDPOINT_URL`, dummy credentials, `AWS_DEFAULT_REGION` and `MOTO_PORT` in `os.environ`
once, so every boto3 client of the process (handlers included) talks to the embedded moto; `stop()` restores
them.

`time_scale` (default 1.0) multiplies every wait of the local Step Functions interpreter (Retry backoffs, Task
timeouts and heartbeats, Wait states, the state machine's timeout) and of the `hang` fault: at 0.01 a Task's 75 s
timeout fires after 0.75 s. The definitions are untouched; only local waits shrink (the work itself does not, so
a scale that makes a Task's timeout shorter than its real work times it out). `set_time_scale` changes it on a
running platform; `reset()` restores the value given to `start()`. The runtime fault middleware
(`lambda_runtime.runtime_faults`: `hang`, `duplicate`) is always installed while a platform runs.

moto never fires EventBridge schedules: `schedules.Scheduler` fires the deployed ones (the sweep, every 5 minutes x
the time scale) and the EventBridge Scheduler schedules the API creates (`POST /v1/schedules`, batch windows' timers)
from `start()` to `stop()`, and a job's deadline is scaled like the other waits (`schedules`). moto's EventBridge
skips a rule's Lambda targets: `moto_patches.event_targets` invokes them (S3 inboxes, EventBridge triggers).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from local import lambda_runtime, moto_patches, schedules, traces, workers
from local.deploy import ACCOUNT, REGION, Deployment, deploy_assembly, synthesize, update_assembly, wait_until
from local.frontdoor import MANUAL_PATH, FrontDoor, GatewayAuthorizer
from local.issuer import LocalIssuer
from local.keys import DEFAULT_KEYS as DEFAULT_KEYS  # re-exported
from local.keys import DEFAULT_WEBHOOK_SECRETS as DEFAULT_WEBHOOK_SECRETS  # re-exported
from local.keys import KEYS_ENV, WEBHOOK_SECRETS_ENV, ApiKey, parse_keys, parse_webhook_secrets, seed_api_keys
from local.moto_patches import bedrock as bedrock_patch
from local.moto_patches import event_targets
from longhaul.core import clock, tracing
from longhaul.core.settings import Env
from longhaul.operations.admin import LOCAL_ADMIN_ACCESS_KEY

LOG = logging.getLogger(__name__)  # not under "longhaul" (the handlers' Powertools logger: it does not propagate)
REPO_ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
TENANT_POLICIES_ENV = "LONGHAUL_TENANT_POLICIES"
#: `0` turns IAM enforcement off (every call then runs with the platform's own unrestricted key, as moto's default).
IAM_ENFORCEMENT_ENV = "LONGHAUL_IAM_ENFORCEMENT"
#: The access key the platform itself signs with (deploy, seeding, inspection): the account's administrator.
PLATFORM_ACCESS_KEY = "testing"
CALLBACK_ALLOWLIST_ENV = "LONGHAUL_CALLBACK_ALLOWLIST"
_ENV_NAMES = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "MOTO_PORT",
    "POWERTOOLS_METRICS_DISABLED",
)


# Function settings a local run takes from its own environment (`make run` with them set), and the tenant policies.
PASSED_THROUGH = (
    "LONGHAUL_MODEL_ROUTES",
    "LONGHAUL_STEP_ROUTES",
    "LONGHAUL_CLASS_ROUTES",
    "LONGHAUL_ROUTE_LIMIT_WAIT_SECONDS",
    "LONGHAUL_MODEL_PRICES",
    "LONGHAUL_BREAKER_FAILURES",
    "LONGHAUL_BREAKER_WINDOW_SECONDS",
    "LONGHAUL_BREAKER_COOLDOWN_SECONDS",
    TENANT_POLICIES_ENV,
    CALLBACK_ALLOWLIST_ENV,  # local receivers the user vouches for (plain http allowed)
    tracing.TRACING_ENV,  # spans off
    tracing.CONTENT_CAPTURE_ENV,  # spans may hold prompts, documents and model output
)


def passed_through(environment: Mapping[str, str]) -> dict[str, str]:
    """The function settings of `environment`, with the key variables its OpenAI-compatible routes name."""
    chosen = {name: environment[name] for name in PASSED_THROUGH if environment.get(name)}
    routes = json.loads(chosen.get("LONGHAUL_MODEL_ROUTES", "{}"))
    for route in routes.values():
        key_env = route.get("api_key_env") if isinstance(route, dict) else None
        if key_env and environment.get(key_env):
            chosen[key_env] = environment[key_env]
    return chosen


def seed_tenant_policies(table: Any, spec: str) -> None:
    """`LONGHAUL_TENANT_POLICIES` (`{"tenant": {"max_job_tokens": …, "daily_tokens": …}}`) into the table."""
    from longhaul.core.budgets import TenantPolicy
    from longhaul.storage.budgets import BudgetStore

    store = BudgetStore(table)
    for tenant, policy in json.loads(spec).items():
        store.put_policy(tenant, TenantPolicy.model_validate(policy))


@dataclass
class _Servers:
    moto: Any
    front_door: FrontDoor | None = None
    scheduler: schedules.Scheduler | None = None


@dataclass
class LocalPlatform:
    """A running local platform. Create it with `LocalPlatform.start(...)`."""

    repo_root: Path
    moto_endpoint: str
    api_url: str | None
    deployments: list[Deployment]
    keys: list[ApiKey]
    timings: dict[str, float] = field(default_factory=dict)
    _servers: _Servers | None = field(default=None, repr=False)
    _saved_env: dict[str, str | None] = field(default_factory=dict, repr=False)
    _cdk_out: Path | None = field(default=None, repr=False)
    _initial_time_scale: float = field(default=1.0, repr=False)
    _remove_fault_middleware: Any = field(default=None, repr=False)
    _remove_deadline_middleware: Any = field(default=None, repr=False)
    _remove_metric_sink: Any = field(default=None, repr=False)
    _policies: str = field(default="", repr=False)
    webhook_secrets: dict[str, str] = field(default_factory=dict, repr=False)  # tenant -> its signing secret
    issuer: LocalIssuer | None = field(default=None, repr=False)  # the local OIDC issuer (`local.issuer`)

    _current: ClassVar[LocalPlatform | None] = None  # the running platform

    # --- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        repo_root: Path | str | None = None,
        *,
        moto_port: int = 0,
        api_port: int = 0,
        keys: str | Mapping[str, str] | None = None,
        env_overrides: Mapping[str, str] | None = None,
        force_synth: bool = False,
        time_scale: float = 1.0,
        enforce_iam: bool | None = None,
    ) -> LocalPlatform:
        """Start moto, patch it, synthesize (or re-use the cached assembly), deploy, seed keys and serve the API.

        Ports of 0 pick free ones. `keys` maps tenant -> "key" or "key:operator" (default `DEFAULT_KEYS`).
        `env_overrides` are added to every function's environment. `time_scale` multiplies the local waits
        (see the module docstring; must be > 0). `enforce_iam` (default: on unless `LONGHAUL_IAM_ENFORCEMENT=0`)
        runs every function, worker task and state machine call under its own role's credentials, authorized
        against the synthesized policies (`moto_patches.iam`).
        """
        if cls._current is not None:
            raise RuntimeError("a LocalPlatform is already running in this process; stop() or reset() it")
        lambda_runtime.set_time_scale(time_scale)  # validates before anything starts
        check_port_free(moto_port, "in-memory AWS")  # before the synth: a busy port is reported in a second
        check_port_free(api_port, "API")
        root = Path(repo_root or REPO_ROOT).resolve()
        timings: dict[str, float] = {}
        started = time.monotonic()
        cdk_out, synthesized = synthesize(root, force=force_synth)
        timings["synth" if synthesized else "synth_reused"] = time.monotonic() - started

        mark = time.monotonic()
        _reset_moto()  # a previous platform of this process may have left stacks behind
        moto_patches.apply()
        if enforce_iam if enforce_iam is not None else os.environ.get(IAM_ENFORCEMENT_ENV, "1") != "0":
            # the platform, the state machines' interpreter, and `longhaul admin --endpoint-url` (an administrator's)
            moto_patches.enforce_iam([PLATFORM_ACCESS_KEY, LOCAL_ADMIN_ACCESS_KEY, moto_patches.INTERPRETER_ACCESS_KEY])
        # The console links to the manual the front door serves (`make docs-site` builds it), unless told otherwise.
        overrides = {Env.MANUAL_URL: MANUAL_PATH, **passed_through(os.environ), **(env_overrides or {})}
        lambda_runtime.configure(code_root=root / "lambdas", environment_overrides=overrides)
        server = _start_moto(moto_port)
        endpoint = "http://{}:{}".format(*server.get_host_and_port())
        platform = cls(
            root, endpoint, None, [], [], timings, _Servers(server), _cdk_out=cdk_out, _initial_time_scale=time_scale
        )
        platform._policies = overrides.get(TENANT_POLICIES_ENV, "")
        platform._remove_fault_middleware = lambda_runtime.install_runtime_faults()
        traces.install()  # every job's spans, for the trace routes (and a collector, when one is named)
        clock.set_pause(lambda seconds: lambda_runtime.scaled_wait(seconds))  # the offline model writes at local pace
        deadlines = (schedules.scale_deadlines, schedules.scale_review_deadlines)
        removals = [lambda_runtime.add_middleware(middleware) for middleware in deadlines]
        platform._remove_deadline_middleware = lambda: [remove() for remove in removals]
        platform._remove_metric_sink = _collect_metrics()
        platform._saved_env = _set_process_environment(endpoint)
        timings["moto_start"] = time.monotonic() - mark
        try:
            platform._deploy_and_seed(keys)
            platform._start_front_door(api_port)
        except BaseException:
            platform._shutdown()
            raise
        timings["total"] = time.monotonic() - started
        cls._current = platform
        return platform

    def _deploy_and_seed(self, keys: str | Mapping[str, str] | None) -> None:
        assert self._cdk_out is not None
        mark = time.monotonic()
        self.deployments = deploy_assembly(self._cdk_out, self.moto_endpoint)
        self.timings["deploy"] = time.monotonic() - mark
        mark = time.monotonic()
        spec = keys if keys is not None else os.environ.get(KEYS_ENV) or DEFAULT_KEYS
        self.keys = parse_keys(spec)
        if self.keys:
            table = self.client("dynamodb", resource=True).Table(self._table_name())
            seed_api_keys(table, self.keys)
        if self._policies:
            seed_tenant_policies(self.client("dynamodb", resource=True).Table(self._table_name()), self._policies)
        self._seed_webhook_secrets()
        assert self._servers is not None
        self._servers.scheduler = schedules.Scheduler(
            self.client("events"), self.client("lambda", read_timeout=900), self.client("scheduler")
        )
        self._servers.scheduler.start()
        # EventBridge rules' Lambda targets (S3 inboxes, EventBridge triggers) are invoked, as on AWS.
        event_targets.INVOKE[:] = [schedules.invoke_async(self.client("lambda", read_timeout=900))]
        # Bedrock's batch inference jobs (`moto_patches.bedrock`) announce their end on EventBridge, as on AWS.
        events, invoker = self.client("events"), self.client("lambda", read_timeout=900)

        def deliver(event: dict[str, Any]) -> None:
            schedules.deliver(events, invoker, event)

        bedrock_patch.DELIVERY[:] = [deliver]
        self.timings["seed"] = time.monotonic() - mark

    @property
    def scheduler(self) -> schedules.Scheduler | None:
        """Fires the deployed schedules (moto does not), on the time-scaled clock."""
        return self._servers.scheduler if self._servers else None

    def _stop_scheduler(self) -> None:
        bedrock_patch.DELIVERY.clear()
        event_targets.INVOKE.clear()
        if self._servers is not None and self._servers.scheduler is not None:
            self._servers.scheduler.stop()
            self._servers.scheduler = None

    def _seed_webhook_secrets(self) -> None:
        """Each tenant's webhook secret into the in-memory Secrets Manager, where the deliverer reads it (as on AWS)."""
        lambda_runtime.ensure_code_root_on_path()
        from longhaul.adapters.secrets import SecretsManagerWebhookSecrets

        spec = os.environ.get(WEBHOOK_SECRETS_ENV) or DEFAULT_WEBHOOK_SECRETS
        store = SecretsManagerWebhookSecrets(self.client("secretsmanager"), self.webhook_secrets_prefix)
        self.webhook_secrets = parse_webhook_secrets(spec)
        for tenant, secret in self.webhook_secrets.items():
            store.put(tenant, secret)

    @property
    def webhook_secrets_prefix(self) -> str:
        return f"{self.deployment.stack_name}/webhooks/"

    def set_function_environment(self, **variables: str) -> None:
        """Add variables to every function's environment from now on (e.g. `LONGHAUL_CALLBACK_ALLOWLIST`)."""
        lambda_runtime.configure(environment_overrides={**lambda_runtime.environment_overrides(), **variables})

    def _start_front_door(self, api_port: int) -> None:
        assert self._servers is not None
        mark = time.monotonic()
        with_api = [d for d in self.deployments if d.rest_api_id]
        if not with_api:
            return
        target = with_api[0]
        assert target.rest_api_id is not None
        declared = target.authorizer
        if declared is not None and self.issuer is None:  # one signing key for the platform's life (resets too)
            deployed = self.client("lambda").get_function_configuration(FunctionName=declared.function_name)
            variables = (deployed.get("Environment") or {}).get("Variables") or {}
            self.issuer = LocalIssuer.for_environment({**variables, **lambda_runtime.environment_overrides()})
        authorizer = (
            GatewayAuthorizer(
                f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{declared.function_name}",
                declared.identity_header,
                declared.ttl_seconds,
                invoke=lambda_runtime.invoke_integration,
            )
            if declared is not None
            else None
        )
        door = FrontDoor(
            self.client("apigateway"),
            target.rest_api_id,
            target.stage_name,
            integration=lambda_runtime.invoke_integration,
            manual=self.repo_root / "site",
            authorizer=authorizer,
            issuer=self.issuer if declared is not None else None,
        )
        port = door.start(HOST, api_port)
        self._servers.front_door = door
        self.api_url = f"http://{HOST}:{port}"
        if declared is not None and self.issuer is not None:
            # The front door's origin is the issuer: the authorizer trusts its tokens, not the template's user pool.
            self.issuer.url = self.api_url
            self.set_function_environment(**self.issuer.function_environment())
        self.timings["front_door"] = time.monotonic() - mark

    @property
    def time_scale(self) -> float:
        return lambda_runtime.time_scale()

    def set_time_scale(self, scale: float) -> None:
        """Change the time scale now (waits already in progress follow it)."""
        lambda_runtime.set_time_scale(scale)

    def redeploy(self, repo_root: Path | str | None = None) -> None:
        """Deploy the CDK app at `repo_root` (default: this platform's) over the running stack, as `cdk deploy` does:
        synthesize it, publish its assets, update the stack. Every function and state machine that changed gets a new
        version and the `live` aliases move to them; executions already running finish on the versions they started
        on (the old ones are retained). The handlers still run in-process from this platform's code root: what a
        redeployed version changes locally is its configuration (its code version among it) and its definition."""
        root = Path(repo_root or self.repo_root).resolve()
        mark = time.monotonic()
        cdk_out, _ = synthesize(root)
        self.deployments = update_assembly(cdk_out, self.moto_endpoint)
        self.timings["redeploy"] = time.monotonic() - mark

    def reset(self) -> None:
        """Wipe every moto backend, redeploy the same assembly and re-seed the keys (servers keep running).

        Running executions are stopped first (so none of them goes on into the fresh deployment), `hang` faults
        are released and the time scale goes back to the one given to `start()`.
        """
        if self._servers and self._servers.front_door:
            self._servers.front_door.stop()
            self._servers.front_door = None
        self._stop_scheduler()
        stop_running_executions()
        workers.stop_all()
        lambda_runtime.interrupt_waits()
        lambda_runtime.set_time_scale(self._initial_time_scale)
        _reset_moto()
        api_port = int(self.api_url.rsplit(":", 1)[1]) if self.api_url else 0
        self._deploy_and_seed({k.label: f"{k.key}:{k.role}@{k.tenant}" for k in self.keys})
        self._start_front_door(api_port)

    def stop(self) -> None:
        """Stop the front door and moto, restore the process environment."""
        self._shutdown()
        if type(self)._current is self:
            type(self)._current = None

    def _shutdown(self) -> None:
        self._stop_scheduler()
        if self._servers is not None:
            if self._servers.front_door is not None:
                self._servers.front_door.stop()
            stop_running_executions()
            workers.stop_all()
            _stop_moto(self._servers.moto)
            self._servers = None
        lambda_runtime.interrupt_waits()
        lambda_runtime.set_time_scale(1.0)
        clock.set_pause(None)
        moto_patches.relax_iam()
        for remove in (self._remove_fault_middleware, self._remove_deadline_middleware, self._remove_metric_sink):
            if remove is not None:
                remove()
        self._remove_fault_middleware = self._remove_deadline_middleware = self._remove_metric_sink = None
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_env = {}

    def __enter__(self) -> LocalPlatform:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @classmethod
    def current(cls) -> LocalPlatform | None:
        return cls._current

    # --- conveniences ----------------------------------------------------------------------------------

    @property
    def deployment(self) -> Deployment:
        """The deployed stack (the first one with a table when the assembly has several)."""
        with_table = [d for d in self.deployments if d.table_name]
        return (with_table or self.deployments)[0]

    def _table_name(self) -> str:
        name = self.deployment.table_name
        if name is None:
            raise LookupError("no stack has exactly one AWS::DynamoDB::Table to seed API keys into")
        return name

    def key_for(self, name: str) -> str:
        """The key named `name` (a tenant's own key is named by the tenant; e.g. `alpha-reviewer` a reviewer's)."""
        return next(k.key for k in self.keys if k.label == name)

    def auth_header(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key_for(name)}"}

    def token(
        self,
        tenant: str,
        role: str = "tenant",
        *,
        groups: list[str] | None = None,
        ttl_seconds: int = 15 * 60,
        subject: str | None = None,
    ) -> str:
        """A JWT of the local OIDC issuer (what `longhaul local token` prints)."""
        if self.issuer is None:
            raise LookupError("the stack has no API authorizer: no local issuer")
        minted = self.issuer.mint(tenant=tenant, role=role, groups=groups, ttl_seconds=ttl_seconds, subject=subject)
        return str(minted["token"])

    def client(self, service: str, *, resource: bool = False, read_timeout: int = 60) -> Any:
        """A boto3 client (or resource) bound to the embedded moto."""
        from botocore.config import Config

        # The front door's client is shared by every concurrent request: a pool as large as the clients it serves.
        config = Config(read_timeout=read_timeout, retries={"max_attempts": 1}, max_pool_connections=64)
        with _SESSION_LOCK:
            factory = _session().resource if resource else _session().client
            return factory(service, endpoint_url=self.moto_endpoint, config=config)

    def execution_history(self, machine: str, name: str) -> list[dict[str, Any]]:
        """Every event of the execution `name` of the state machine whose logical id or path contains `machine`
        (a Distributed Map's child executions keep their own)."""
        sfn = self.client("stepfunctions")
        arn = self.deployment.state_machine(machine).replace(":stateMachine:", ":execution:") + f":{name}"
        events: list[dict[str, Any]] = []
        token = None
        while True:
            page = sfn.get_execution_history(
                executionArn=arn, maxResults=1000, **({"nextToken": token} if token else {})
            )
            events.extend(page["events"])
            token = page.get("nextToken")
            if not token:
                return events

    def wait_for_execution(self, execution_arn: str, *, timeout: float = 60) -> dict[str, Any]:
        """Poll a Step Functions execution until it leaves RUNNING; returns `describe_execution`."""
        sfn = self.client("stepfunctions")

        def finished() -> dict[str, Any] | None:
            described: dict[str, Any] = sfn.describe_execution(executionArn=execution_arn)
            return None if described["status"] == "RUNNING" else described

        return wait_until(finished, timeout=timeout, interval=0.1, what=f"execution {execution_arn}")


def _collect_metrics() -> Any:
    """Put every metric the functions emit into the in-memory CloudWatch, as CloudWatch ingests their EMF lines on
    AWS (there is no agent locally): the operators' metrics route then reads the same numbers. Returns the remover."""
    lambda_runtime.ensure_code_root_on_path()
    from moto.cloudwatch.models import cloudwatch_backends

    from longhaul.core.observability import NAMESPACE, add_metric_sink

    def put(name: str, value: float, unit: str, dimensions: dict[str, str]) -> None:
        datum = {
            "MetricName": name,
            "Value": value,
            "Unit": unit,
            # naive UTC, as moto keeps a request's timestamps: an aware one fails its comparison with a query's window
            "Timestamp": datetime.now(UTC).replace(tzinfo=None),
            "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
        }
        cloudwatch_backends[ACCOUNT][REGION].put_metric_data(NAMESPACE, [datum])

    return add_metric_sink(put)


def stop_running_executions() -> int:
    """Stop (abort) every RUNNING execution of the executing Step Functions backend; returns how many."""
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    stopped = 0
    for account in list(stepfunctions_parser_backends.values()):
        for backend in list(account.values()):
            for machine in list(backend.state_machines):
                for execution in list(machine.executions):
                    status = getattr(execution, "exec_status", None)
                    if getattr(status, "value", status) != "RUNNING":
                        continue
                    try:
                        execution.stop(stop_date=datetime.now(UTC), error="Longhaul.PlatformReset", cause="")
                        stopped += 1
                    except Exception:  # never block a reset or a shutdown
                        LOG.warning("could not stop %s", getattr(execution, "exec_arn", execution), exc_info=True)
    return stopped


def _reset_moto() -> None:
    from moto.core.base_backend import BackendDict

    BackendDict.reset()


class PortInUse(OSError):
    """A port the platform was told to use is held by another process."""


def check_port_free(port: int, what: str) -> None:
    """Fail fast with a clear message when another process listens on `port` (0 = any port: nothing to check).

    Needed for moto: werkzeug exits its server thread on a busy port and `ThreadedMotoServer.start` waits forever.
    The probe sets SO_REUSEADDR like the servers themselves (werkzeug's `allow_reuse_address`): the connections a
    previous run left in TIME_WAIT do not hold the port, so a restart works at once; a listener still does.
    """
    if not port:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
            probe.listen()
        except OSError as exc:
            raise PortInUse(f"the {what} port {HOST}:{port} is in use by another process") from exc


def _start_moto(port: int) -> Any:
    from moto.server import ThreadedMotoServer

    check_port_free(port, "in-memory AWS")
    server = ThreadedMotoServer(ip_address=HOST, port=port, verbose=False)
    server.start()
    host, bound = server.get_host_and_port()
    assert server._server is not None  # started
    for name in {host, "localhost"}:  # the interpreter's clients call "localhost"
        moto_patches.serve_in_process(f"{name}:{bound}", server._server.app)
    return server


def _stop_moto(server: Any) -> None:
    """`ThreadedMotoServer.stop` shuts the server down but leaves its socket listening: close it too."""
    host, bound = server.get_host_and_port()
    for name in {host, "localhost"}:
        moto_patches.stop_serving_in_process(f"{name}:{bound}")
    server.stop()
    listening = getattr(server, "_server", None)
    if listening is not None:
        listening.server_close()


def _set_process_environment(endpoint: str) -> dict[str, str | None]:
    """Point every boto3 client of the process at moto, once; returns the previous values."""
    saved = {name: os.environ.get(name) for name in _ENV_NAMES}
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID=PLATFORM_ACCESS_KEY,
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_SESSION_TOKEN="testing",
        AWS_DEFAULT_REGION=REGION,
        AWS_REGION=REGION,
        MOTO_PORT=endpoint.rsplit(":", 1)[1],
        # CloudWatch metrics (EMF lines on stdout) have nowhere to go locally.
        POWERTOOLS_METRICS_DISABLED="true",
    )
    return saved


_SESSION_LOCK = threading.Lock()  # creating clients from one session is not thread-safe


@cache
def _session() -> Any:
    """One boto3 session for every `LocalPlatform.client`: its loader parses each service model once."""
    import boto3

    return boto3.session.Session(region_name=REGION)
