"""The template `cdk deploy` uses (cdk.json's context: bundling on, Bedrock) and the asset it uploads, bundled for real.

This is the one path that runs the real bundling: pip fetches the wheels for the Lambda platform from the package
index and Pyodide compiles the bytecode (about half a minute once pip's cache is warm). The asset checked is the one
the synthesis staged in the cloud assembly, i.e. what `cdk deploy` zips and uploads.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from stacks.bundling import TARGET, UNZIPPED_LIMIT_BYTES
from tests.infrastructure.conftest import ROOT, resources, synthesize

CDK_CONTEXT: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
# importlib.util.MAGIC_NUMBER of CPython 3.14 (fixed for all 3.14.x releases); a pyc starts with it.
MAGIC = {"3.14": (3627).to_bytes(2, "little") + b"\r\n"}
UNCHECKED_HASH_FLAGS = (0b01).to_bytes(4, "little")  # hash-based, source not checked (PEP 552)
ELF_MACHINES = {"aarch64": 183, "x86_64": 62}
RUNTIME_OWNED = ("boto3", "botocore", "s3transfer")


@pytest.fixture(scope="module")
def deploy_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(tmp_path_factory.mktemp("cdk.out.deploy"), dict(CDK_CONTEXT))


@pytest.fixture(scope="module")
def deploy_template(deploy_assembly: Path) -> dict[str, Any]:
    return json.loads(next(deploy_assembly.glob("Longhaul-*.template.json")).read_text())


@pytest.fixture(scope="module")
def platform_functions(deploy_template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    functions = resources(deploy_template, "AWS::Lambda::Function")
    return {k: f for k, f in functions.items() if f["Properties"].get("Handler", "").startswith("handlers.")}


@pytest.fixture(scope="module")
def asset(deploy_assembly: Path, platform_functions: dict[str, dict[str, Any]]) -> Path:
    (key,) = {f["Properties"]["Code"]["S3Key"] for f in platform_functions.values()}
    directory = deploy_assembly / f"asset.{key.removesuffix('.zip')}"
    assert directory.is_dir(), f"the functions' asset {key} is not staged in the assembly"
    return directory


def files(directory: Path, pattern: str) -> list[Path]:
    return [p for p in directory.rglob(pattern) if p.is_file()]


def test_cdk_json_bundles_and_uses_bedrock(platform_functions):
    assert CDK_CONTEXT["longhaul:bundle"] is True
    assert len(platform_functions) >= 3  # api, steps, sweep
    for logical_id, function in platform_functions.items():
        props = function["Properties"]
        assert props["Runtime"] == f"python{TARGET.python}", logical_id
        assert props["Architectures"] == ["arm64"], logical_id
        assert props["Environment"]["Variables"]["LONGHAUL_MODEL_PROVIDER"] == "bedrock", logical_id


def test_every_handler_is_defined_in_the_bundled_asset(platform_functions, asset):
    for function in platform_functions.values():
        module, _, name = function["Properties"]["Handler"].rpartition(".")
        source = asset / (module.replace(".", "/") + ".py")
        tree = ast.parse(source.read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)} | {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        assert name in defined, f"{module}.{name} is not defined in the asset"


def test_asset_fits_lambda_and_ships_no_runtime_libraries(asset):
    size = sum(p.stat().st_size for p in files(asset, "*"))
    assert size < UNZIPPED_LIMIT_BYTES, f"unzipped asset is {size / 1e6:.0f} MB, Lambda allows 250 MB"
    shipped = {p.name for p in asset.iterdir()}
    assert shipped.isdisjoint(RUNTIME_OWNED), f"the runtime provides {sorted(shipped & set(RUNTIME_OWNED))}"
    assert {"handlers", "longhaul", "pydantic", "numpy"} <= shipped
    assert {"opentelemetry", "google"} <= shipped  # the tracing SDK and its protobuf, without a botocore of its own
    assert "requests" not in shipped  # the OTLP/HTTP exporter's client stays out: the runtime's botocore sends


def test_every_module_has_unchecked_bytecode_for_the_target_python(asset):
    sources = files(asset, "*.py")
    assert len(sources) > 500  # the dependencies are there, not only our package
    for source in sources:
        pyc = source.parent / "__pycache__" / f"{source.stem}.{TARGET.cache_tag}.pyc"
        assert pyc.is_file(), f"{source.relative_to(asset)} has no {TARGET.cache_tag} bytecode"
        header = pyc.read_bytes()[:8]
        assert header[:4] == MAGIC[TARGET.python], f"{pyc.relative_to(asset)} is not {TARGET.python} bytecode"
        assert header[4:8] == UNCHECKED_HASH_FLAGS, f"{pyc.relative_to(asset)} would be checked against its source"
    strays = [p for p in files(asset, "*.pyc") if f".{TARGET.cache_tag}." not in p.name]
    assert not strays, f"bytecode for another Python: {strays[:3]}"


def test_every_native_library_is_built_for_the_target_machine_and_python(asset):
    native = [p for p in files(asset, "*") if p.read_bytes()[:4] == b"\x7fELF"]
    assert native, "no native library found: numpy and pydantic-core have some"
    for library in native:
        header = library.read_bytes()[:20]
        assert header[4] == 2, f"{library.name} is not 64-bit"
        assert int.from_bytes(header[18:20], "little") == ELF_MACHINES[TARGET.machine], f"{library.name} arch"
        if ".cpython-" in library.name:
            assert f".{TARGET.cache_tag}-{TARGET.machine}-linux-gnu." in library.name, library.name
