"""Synthesize (or re-use a cached) CDK cloud assembly, publish its assets and deploy its stacks into moto.

Nothing here names a Longhaul resource: the stacks, templates and assets come from the assembly's `manifest.json`,
and `Deployment` is built from what CloudFormation reports for each stack.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

#: What `python app.py` reads of the repository (its imports and the Lambda asset's directory).
SOURCES = ("app.py", "cdk.json", "stacks", "state_machines", "lambdas")
#: The CDK's own libraries: their versions decide the template as much as the sources do.
CDK_DISTRIBUTIONS = (
    "aws-cdk-lib",
    "constructs",
    "jsii",
    "cdk-nag",
    "aws-cdk.cloud-assembly-schema",
    "aws-cdk.asset-awscli-v1",
    "aws-cdk.asset-node-proxy-agent-v6",
)
#: Where the local runtime keeps its assemblies, one directory per inputs' digest (gitignored; `cdk.out` stays the
#: CLI's and `make synth`'s, which synthesize other stages).
SYNTH_CACHE = Path(".local") / "synth"
KEPT_ASSEMBLIES = 4
LOCAL_STAGE_CONTEXT, LOCAL_STAGE = "longhaul:stage", "local"
ACCOUNT = "123456789012"
REGION = "us-east-1"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]

T = TypeVar("T")


def wait_until(probe: Callable[[], T | None], *, timeout: float, interval: float = 0.05, what: str = "") -> T:
    """Call `probe` until it returns something other than None; TimeoutError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result is not None:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what or probe}")
        time.sleep(interval)


# --- synthesis -----------------------------------------------------------------------------------------


def _source_files(repo_root: Path) -> Iterable[Path]:
    for name in SOURCES:
        path = repo_root / name
        if path.is_file():
            yield path
        elif path.is_dir():
            # node_modules: the bytecode tool's npm install, decided by its package-lock.json (hashed)
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and "node_modules" not in p.parts and p.suffix != ".pyc"
            )


def _synth_context() -> dict[str, str]:
    # The `local` stage: no custom resource that empties buckets (moto cannot run its Node.js Lambda).
    return {LOCAL_STAGE_CONTEXT: LOCAL_STAGE}


def _synth_environment(out: Path) -> dict[str, str]:
    return {
        **os.environ,
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        "CDK_OUTDIR": str(out),
        "CDK_CONTEXT_JSON": json.dumps(_synth_context()),
    }


def synthesis_settings() -> set[str]:
    """The environment variables the CDK app reads while it synthesizes: each workflow segment's bound setting."""
    from longhaul.engine.spec import registry  # the spec language: light, and on the path the app runs with

    return {s.timeout_setting for spec in registry().values() for s in spec.segments if s.timeout_setting}


def source_digest(repo_root: Path) -> str:
    """SHA-256 over everything the synthesized assembly depends on: the relative paths and contents of the sources
    the CDK app reads, the CDK libraries' versions, the Python version, the context and the `CDK_*` environment."""
    digest = hashlib.sha256()
    for path in _source_files(repo_root):
        digest.update(path.relative_to(repo_root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    for name in CDK_DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{name}=={version}\0".encode())
    digest.update(f"python {sys.version}\0".encode())
    environment = _synth_environment(Path())
    cdk = sorted((k, v) for k, v in environment.items() if k.startswith(("CDK_", "JSII_")) and k != "CDK_OUTDIR")
    digest.update(json.dumps(cdk).encode())
    # Settings the app reads at synthesis (a segment's bound): a change synthesizes anew.
    read = sorted((k, os.environ.get(k, "")) for k in synthesis_settings())
    digest.update(json.dumps(read).encode())
    return digest.hexdigest()


def synthesize(repo_root: Path, *, force: bool = False) -> tuple[Path, bool]:
    """The assembly of the CDK app at `repo_root` (the `local` stage), synthesized by `python app.py` unless one for
    the same inputs (`source_digest`) is cached; returns (its directory, whether it was synthesized now).

    Each assembly lives in `.local/synth/<digest>`, written to a staging directory first and renamed when complete,
    so a cached one is never partial or stale, and concurrent starts share it. An input that changes while the app
    runs makes it run again. `force` synthesizes even when a cached assembly exists (and replaces it).
    """
    cache = repo_root / SYNTH_CACHE
    cache.mkdir(parents=True, exist_ok=True)
    for _ in range(3):
        digest = source_digest(repo_root)
        out = cache / digest[:32]
        if not force and (out / "manifest.json").is_file():
            os.utime(out)  # most recently used: pruned last
            return out, False
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=cache))
        try:
            _run_app(repo_root, staging)
            if source_digest(repo_root) != digest:
                continue  # a source changed while the app ran: the assembly may mix both
            if force and out.exists():
                shutil.rmtree(out, ignore_errors=True)
            with contextlib.suppress(OSError):  # another start stored the same digest meanwhile: as good
                staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _prune(cache, keep=out)
        return out, True
    raise RuntimeError(f"the CDK app's sources under {repo_root} kept changing while it was synthesized")


def _run_app(repo_root: Path, out: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "app.py"],
        cwd=repo_root,
        env=_synth_environment(out),
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"`python app.py` failed ({completed.returncode}):\n{completed.stderr[-4000:]}")


def _prune(cache: Path, *, keep: Path) -> None:
    """Keep the most recently used assemblies (and `keep`); staging directories of other starts are left alone."""
    assemblies = sorted(
        (p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in assemblies[KEPT_ASSEMBLIES:]:
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


# --- cloud assembly --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackArtifact:
    name: str
    template_path: Path
    asset_manifests: tuple[Path, ...]


def read_assembly(cdk_out: Path) -> list[StackArtifact]:
    """The CloudFormation stacks of the assembly's `manifest.json`, dependencies first (manifest order)."""
    manifest = json.loads((cdk_out / "manifest.json").read_text())
    artifacts: dict[str, Any] = manifest.get("artifacts", {})
    stacks = []
    for name, artifact in artifacts.items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        dependencies = [artifacts.get(d, {}) for d in artifact.get("dependencies", [])]
        asset_files = tuple(
            cdk_out / d["properties"]["file"] for d in dependencies if d.get("type") == "cdk:asset-manifest"
        )
        stacks.append(
            StackArtifact(
                name=artifact.get("properties", {}).get("stackName", name),
                template_path=cdk_out / artifact["properties"]["templateFile"],
                asset_manifests=asset_files,
            )
        )
    return stacks


def _resolve(text: str) -> str:
    return (
        text.replace("${AWS::AccountId}", ACCOUNT).replace("${AWS::Region}", REGION).replace("${AWS::Partition}", "aws")
    )


def zip_directory(directory: Path) -> bytes:
    """A deterministic zip of `directory` (sorted entries, fixed timestamps, no __pycache__)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                info = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def _asset_bytes(cdk_out: Path, source: dict[str, Any]) -> bytes:
    path = cdk_out / str(source["path"])
    if source.get("packaging") == "zip" and path.is_dir():
        return zip_directory(path)
    return path.read_bytes()


def publish_assets(s3: Any, cdk_out: Path, manifest_path: Path) -> int:
    """Upload every file asset to its destination bucket/key (buckets created on demand); returns the count."""
    manifest = json.loads(manifest_path.read_text())
    created: set[str] = set()
    count = 0
    for asset in manifest.get("files", {}).values():
        body = _asset_bytes(cdk_out, asset["source"])
        for destination in asset.get("destinations", {}).values():
            bucket = _resolve(destination["bucketName"])
            if bucket not in created:
                _ensure_bucket(s3, bucket)
                created.add(bucket)
            s3.put_object(Bucket=bucket, Key=_resolve(destination["objectKey"]), Body=body)
            count += 1
    return count


def _ensure_bucket(s3: Any, bucket: str) -> None:
    with contextlib.suppress(s3.exceptions.BucketAlreadyOwnedByYou):
        s3.create_bucket(Bucket=bucket)


# --- deployment ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StackResource:
    logical_id: str
    type: str
    physical_id: str
    path: str = ""  # the CDK construct path (`aws:cdk:path` metadata), when present


@dataclass(frozen=True)
class ApiAuthorizer:
    """The REST API's Lambda (REQUEST) authorizer as the template declares it (moto stores none): the function it
    invokes, the header its answers are cached by, and for how long API Gateway keeps an answer."""

    function_name: str
    identity_header: str
    ttl_seconds: int


@dataclass(frozen=True)
class Deployment:
    """What one deployed stack contains, keyed by CloudFormation logical id."""

    stack_name: str
    stack_id: str
    outputs: dict[str, str]
    resources: dict[str, StackResource]
    table_name: str | None
    bucket_name: str | None
    state_machines: dict[str, str]  # logical id -> ARN
    functions: dict[str, str]  # logical id -> function name
    handlers: dict[str, str] = field(default_factory=dict)  # logical id -> handler string
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> bucket name
    rest_api_id: str | None = None
    stage_name: str = "local"
    authorizer: ApiAuthorizer | None = None

    def function_for_handler(self, handler: str) -> str:
        """The name of the (single) function whose handler is `handler`, e.g. `handlers.api.handler`."""
        return self.functions[_only([lid for lid, h in self.handlers.items() if h == handler], handler)]

    def state_machine(self, fragment: str) -> str:
        """The ARN of the state machine whose logical id or construct path contains `fragment`."""
        return self.state_machines[self._find(self.state_machines, fragment)]

    def _find(self, ids: Iterable[str], fragment: str) -> str:
        return _only([i for i in ids if fragment in i or fragment in self.resources[i].path], fragment)


def _only(matches: list[str], what: str) -> str:
    if len(matches) != 1:
        raise LookupError(f"{what!r} matches {len(matches)} resources: {matches}")
    return matches[0]


def _by_type(resources: dict[str, StackResource], kind: str) -> dict[str, str]:
    return {lid: r.physical_id for lid, r in resources.items() if r.type == kind}


def _single(resources: dict[str, StackResource], kind: str) -> str | None:
    found = list(_by_type(resources, kind).values())
    return found[0] if len(found) == 1 else None


def create_stack(cfn: Any, name: str, template_body: str, *, timeout: float = 120) -> str:
    """CreateStack and wait for CREATE_COMPLETE; raises with the failure reasons otherwise."""
    stack_id: str = cfn.create_stack(StackName=name, TemplateBody=template_body, Capabilities=CAPABILITIES)["StackId"]

    def settled() -> str | None:
        status: str = cfn.describe_stacks(StackName=stack_id)["Stacks"][0]["StackStatus"]
        return None if status.endswith("IN_PROGRESS") else status

    status = wait_until(settled, timeout=timeout, what=f"stack {name}")
    if status != "CREATE_COMPLETE":
        events = cfn.describe_stack_events(StackName=stack_id)["StackEvents"]
        reasons = [
            f"{e['LogicalResourceId']}: {e.get('ResourceStatusReason')}"
            for e in events
            if "FAILED" in e["ResourceStatus"]
        ]
        raise RuntimeError(f"stack {name} ended in {status}: {reasons}")
    return stack_id


def update_stack(cfn: Any, name: str, template_body: str, *, timeout: float = 120) -> None:
    """UpdateStack and wait for UPDATE_COMPLETE (a template without changes is no update, as on AWS)."""
    try:
        cfn.update_stack(StackName=name, TemplateBody=template_body, Capabilities=CAPABILITIES)
    except cfn.exceptions.ClientError as error:
        if "No updates are to be performed" in str(error):
            return
        raise

    def settled() -> str | None:
        status: str = cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
        return None if status.endswith("IN_PROGRESS") else status

    status = wait_until(settled, timeout=timeout, what=f"stack {name} to update")
    if status != "UPDATE_COMPLETE":
        raise RuntimeError(f"stack {name} ended in {status}")


def describe_deployment(clients: Clients, stack_name: str, template: dict[str, Any]) -> Deployment:
    """Collect a deployed stack's outputs and resources (physical ids from CloudFormation)."""
    stack = clients.cloudformation.describe_stacks(StackName=stack_name)["Stacks"][0]
    declared: dict[str, Any] = template.get("Resources", {})
    resources = {
        r["LogicalResourceId"]: StackResource(
            logical_id=r["LogicalResourceId"],
            type=r["ResourceType"],
            physical_id=r.get("PhysicalResourceId", ""),
            path=declared.get(r["LogicalResourceId"], {}).get("Metadata", {}).get("aws:cdk:path", ""),
        )
        for r in _paginate(
            clients.cloudformation, "list_stack_resources", "StackResourceSummaries", StackName=stack_name
        )
        if r.get("LogicalResourceId")  # moto lists skipped resources (e.g. ApiGateway::Account) without an id
    }
    functions = _by_type(resources, "AWS::Lambda::Function")
    return Deployment(
        stack_name=stack_name,
        stack_id=stack["StackId"],
        outputs={o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
        resources=resources,
        table_name=_single(resources, "AWS::DynamoDB::Table"),
        bucket_name=_data_bucket(resources, declared),
        state_machines=_by_type(resources, "AWS::StepFunctions::StateMachine"),
        functions=functions,
        handlers={
            lid: clients.lambda_.get_function(FunctionName=name)["Configuration"].get("Handler", "")
            for lid, name in functions.items()
        },
        queues=_by_type(resources, "AWS::SQS::Queue"),
        buckets=_by_type(resources, "AWS::S3::Bucket"),
        rest_api_id=_single(resources, "AWS::ApiGateway::RestApi"),
        stage_name=_stage_name(declared),
        authorizer=_authorizer(declared, functions),
    )


def apply_bucket_notifications(s3: Any, deployment: Deployment, template: dict[str, Any]) -> None:
    """A bucket's `NotificationConfiguration.EventBridgeConfiguration` (its events on the default bus: the S3 inboxes'
    objects), which moto's CloudFormation does not apply, applied through the S3 API as CloudFormation would."""
    for logical_id, bucket in deployment.buckets.items():
        declared = template.get("Resources", {}).get(logical_id, {}).get("Properties", {})
        bridge = declared.get("NotificationConfiguration", {}).get("EventBridgeConfiguration", {})
        if bridge.get("EventBridgeEnabled"):
            s3.put_bucket_notification_configuration(
                Bucket=bucket, NotificationConfiguration={"EventBridgeConfiguration": {}}
            )


def _data_bucket(resources: dict[str, StackResource], declared: dict[str, Any]) -> str | None:
    """The only bucket that is neither another bucket's access-log destination nor a CloudTrail trail's."""
    log_targets = {
        json.dumps(r.get("Properties", {}).get("LoggingConfiguration", {}).get("DestinationBucketName"))
        for r in declared.values()
        if r.get("Type") == "AWS::S3::Bucket"
    } | {
        json.dumps(r.get("Properties", {}).get("S3BucketName"))
        for r in declared.values()
        if r.get("Type") == "AWS::CloudTrail::Trail"
    }
    buckets = _by_type(resources, "AWS::S3::Bucket")
    data = [name for lid, name in buckets.items() if json.dumps({"Ref": lid}) not in log_targets]
    return data[0] if len(data) == 1 else None


def _authorizer(declared: dict[str, Any], functions: dict[str, str]) -> ApiAuthorizer | None:
    """The template's REQUEST authorizer (a Lambda named in its `AuthorizerUri`, cached by one header for
    `AuthorizerResultTtlInSeconds`, 300 when absent, as API Gateway defaults), if the stack declares one."""
    found = [r.get("Properties", {}) for r in declared.values() if r.get("Type") == "AWS::ApiGateway::Authorizer"]
    if not found:
        return None
    if len(found) > 1:
        raise ValueError(f"{len(found)} API Gateway authorizers: the local front door runs one")
    properties = found[0]
    uri = json.dumps(properties.get("AuthorizerUri"))
    named = [lid for lid in functions if f'"Fn::GetAtt": ["{lid}", "Arn"]' in uri]
    source = str(properties.get("IdentitySource", ""))
    if len(named) != 1 or not source.startswith("method.request.header."):
        raise ValueError(f"an authorizer the local front door cannot run: {properties}")
    return ApiAuthorizer(
        function_name=functions[named[0]],
        identity_header=source.removeprefix("method.request.header."),
        ttl_seconds=int(properties.get("AuthorizerResultTtlInSeconds", 300)),
    )


def _stage_name(declared: dict[str, Any]) -> str:
    """The REST API stage from the template (moto does not create `AWS::ApiGateway::Stage`)."""
    for kind in ("AWS::ApiGateway::Stage", "AWS::ApiGateway::Deployment"):
        for resource in declared.values():
            name = resource.get("Properties", {}).get("StageName")
            if resource.get("Type") == kind and isinstance(name, str):
                return name
    return "local"


def _paginate(client: Any, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page[key]]


@dataclass(frozen=True)
class Clients:
    cloudformation: Any
    s3: Any
    lambda_: Any

    @classmethod
    def create(cls, endpoint: str) -> Clients:
        import boto3
        from botocore.config import Config

        session = boto3.session.Session(region_name=REGION)
        # moto creates or updates a stack within the call, which takes minutes on a busy machine: wait for it, and
        # never send a CreateStack again (a retry after a read timeout finds the stack it created).
        config = Config(read_timeout=900, retries={"max_attempts": 1})
        return cls(
            *(session.client(s, endpoint_url=endpoint, config=config) for s in ("cloudformation", "s3", "lambda"))
        )


def update_assembly(cdk_out: Path, endpoint: str) -> list[Deployment]:
    """Deploy a new assembly over the stacks already deployed, as `cdk deploy` does: publish its assets and update
    each stack (resources created and updated in dependency order, retained ones kept: `moto_patches`)."""
    clients = Clients.create(endpoint)
    deployments = []
    for stack in read_assembly(cdk_out):
        for manifest in stack.asset_manifests:
            publish_assets(clients.s3, cdk_out, manifest)
        body = stack.template_path.read_text()
        update_stack(clients.cloudformation, stack.name, body)
        deployments.append(describe_deployment(clients, stack.name, json.loads(body)))
        apply_bucket_notifications(clients.s3, deployments[-1], json.loads(body))
    return deployments


def deploy_assembly(cdk_out: Path, endpoint: str) -> list[Deployment]:
    """Publish assets and create every stack of the assembly in order; returns one `Deployment` per stack."""
    clients = Clients.create(endpoint)
    deployments = []
    for stack in read_assembly(cdk_out):
        for manifest in stack.asset_manifests:
            publish_assets(clients.s3, cdk_out, manifest)
        body = stack.template_path.read_text()
        create_stack(clients.cloudformation, stack.name, body)
        deployments.append(describe_deployment(clients, stack.name, json.loads(body)))
        apply_bucket_notifications(clients.s3, deployments[-1], json.loads(body))
    return deployments
