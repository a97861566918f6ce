"""The one Lambda code asset: third-party wheels for the Lambda platform and bytecode for its Python, no Docker.

`cdk synth`/`cdk deploy` (context `longhaul:bundle=true`, set in cdk.json) builds the asset in three steps:
1. pip installs `lambdas/requirements.txt` (pinned by constraints.txt) as manylinux wheels for the target
   architecture and Python, whatever the machine running the CDK is;
2. the source tree is copied next to them;
3. every module is compiled to bytecode for the target Python, as unchecked hash-based pycs in `__pycache__`.
   Lambda's code directory is read-only, so without them every cold start compiles every module it imports
   (the API function took 1.8 s, 7.9× a bare boto3 handler); unchecked pycs are loaded without a stat of the
   source. The target is Python 3.14, and no 3.14 interpreter can be installed with the project's own files
   (PyPI has none; system packages are out), so the modules are compiled by the CPython 3.14 that Pyodide embeds
   (npm `pyodide`, pinned in `stacks/bytecode/`, run with the Node.js the CDK needs anyway): the same compiler,
   magic number and cache tag as the native interpreter. When the machine's own Python is the target, it
   compiles instead.
`python app.py` (tests, the local runtime) skips bundling: the functions run in-process there.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

ROOT = Path(__file__).resolve().parent.parent
LAMBDAS_DIR = ROOT / "lambdas"
CONSTRAINTS = ROOT / "constraints.txt"
BYTECODE_TOOL = Path(__file__).resolve().parent / "bytecode"
RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
# Lambda's limit on a function's unzipped code (and layers): 250 MB.
UNZIPPED_LIMIT_BYTES = 262_144_000
# `workers/` is the container workers' code (its own image, its own heavy requirements): never in the Lambda asset.
WORKERS_DIR = "workers"
EXCLUDE = ["**/__pycache__", "**/*.pyc", "tests", ".mypy_cache", WORKERS_DIR]
_MACHINES = {"arm64": "aarch64", "x86_64": "x86_64"}
# Wheels for the Lambda platform (Amazon Linux 2023, glibc 2.34): any manylinux tag up to that.
_MANYLINUX = ("2014", "_2_28", "_2_34")


@dataclass(frozen=True)
class Platform:
    """What the bundle is built for: a CPython version ("3.14") and a Linux machine ("aarch64")."""

    python: str
    machine: str

    @property
    def cache_tag(self) -> str:
        return "cpython-" + self.python.replace(".", "")

    @classmethod
    def this_machine(cls) -> Platform:
        return cls(python=f"{sys.version_info.major}.{sys.version_info.minor}", machine=platform.machine())


TARGET = Platform(python=RUNTIME.name.removeprefix("python"), machine=_MACHINES[ARCHITECTURE.name])


def build_bundle(out: Path, target: Platform = TARGET) -> None:
    """Wheels for `target`, the source tree, and bytecode for `target`'s Python, all in `out`."""
    install_dependencies(out, target)
    shutil.copytree(
        LAMBDAS_DIR, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", WORKERS_DIR)
    )
    compile_bytecode(out, target.python)


def install_dependencies(out: Path, target: Platform) -> None:
    _pip_install(out, target, LAMBDAS_DIR / "requirements.txt")


def _pip_install(out: Path, target: Platform, requirements: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",  # pip would compile for the Python running it, not the target
            "--only-binary=:all:",
            *(f"--platform=manylinux{tag}_{target.machine}" for tag in _MANYLINUX),
            f"--python-version={target.python}",
            "--implementation=cp",
            "--target",
            str(out),
            "-r",
            str(requirements),
            "-c",
            str(CONSTRAINTS),
        ],
        check=True,
    )


def compile_bytecode(directory: Path, python: str) -> None:
    """Compile every module under `directory` for `python`, as unchecked hash-based pycs in `__pycache__`."""
    if python == Platform.this_machine().python:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "compileall",
                "-q",
                "-j0",
                "--invalidation-mode=unchecked-hash",
                str(directory),
            ],
            check=True,
        )
        return
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("bundling for the Lambda runtime needs Node.js (it compiles the bytecode through Pyodide)")
    _install_bytecode_tool()
    subprocess.run([node, str(BYTECODE_TOOL / "compile.mjs"), str(directory), python], check=True)


def _install_bytecode_tool() -> None:
    """`npm ci` the pinned Pyodide once (under a lock: concurrent synths share the folder)."""
    wanted = json.loads((BYTECODE_TOOL / "package-lock.json").read_text())["packages"]["node_modules/pyodide"]
    installed = BYTECODE_TOOL / "node_modules" / "pyodide" / "package.json"
    with (BYTECODE_TOOL / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed.exists() and json.loads(installed.read_text())["version"] == wanted["version"]:
            return
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("bundling for the Lambda runtime needs npm (to install the pinned Pyodide)")
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=BYTECODE_TOOL,
            check=True,
        )


def bundler_fingerprint() -> str:
    """What else decides the bundle besides `lambdas/`: the bundler, the pins, the bytecode tool.

    It goes into the asset hash, so changing any of them uploads a new asset instead of reusing the old one.
    """
    digest = hashlib.sha256()
    for path in (Path(__file__), CONSTRAINTS, BYTECODE_TOOL / "package-lock.json", BYTECODE_TOOL / "compile.mjs"):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@jsii.implements(ILocalBundling)
class PipBundling:
    """Bundles source + wheels + bytecode for the Lambda platform on this machine (no Docker)."""

    def try_bundle(self, output_dir: str, *, image: DockerImage, **_: object) -> bool:
        build_bundle(Path(output_dir))
        return True


#: How much of the asset hash names a code version (in checkpoints, model calls, state machine versions).
CODE_VERSION_LENGTH = 16


def code_version(code: lambda_.Code, scope: Construct) -> str:
    """The code asset's version: the start of its hash, which changes whenever the code (or, bundled, the bundler,
    its pins or the bytecode tool) does. Binding creates the asset once per stack; the functions then share it."""
    location = code.bind(scope).s3_location
    if location is None:
        raise ValueError("the Lambda code is not an S3 asset: it has no hash to version it by")
    return Path(location.object_key).stem[:CODE_VERSION_LENGTH]


def code_asset(*, bundle: bool) -> lambda_.Code:
    if not bundle:
        return lambda_.Code.from_asset(str(LAMBDAS_DIR), exclude=EXCLUDE)
    return lambda_.Code.from_asset(
        str(LAMBDAS_DIR),
        exclude=EXCLUDE,
        asset_hash_type=AssetHashType.SOURCE,
        bundling=BundlingOptions(
            image=DockerImage.from_registry(f"public.ecr.aws/sam/build-{RUNTIME.name}"),
            local=PipBundling(),
            command=["echo", "local bundling only"],
            # The bundling options are part of a SOURCE asset hash (see bundler_fingerprint).
            environment={"LONGHAUL_BUNDLER": bundler_fingerprint()},
        ),
    )
