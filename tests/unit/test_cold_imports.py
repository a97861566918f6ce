"""A handler's cold start imports only what every invocation needs: heavy step libraries load where they are used."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

LAMBDAS = Path(__file__).resolve().parents[2] / "lambdas"
# `handlers.resolver` (the API's thread-safe resolver class) and `handlers.lean_imports` (what `handlers` runs first)
# are imported by handlers: not handlers of their own.
HANDLER_MODULES = sorted(
    f"handlers.{p.stem}"
    for p in (LAMBDAS / "handlers").glob("*.py")
    if p.stem not in ("__init__", "resolver", "lean_imports")
)
# Libraries only some steps use (BM25 retrieval, PDF parsing, output repair), and the X-Ray SDK nothing uses.
HEAVY = ("numpy", "bm25s", "pypdf", "json_repair", "aws_xray_sdk")


def modules_loaded_by_importing(module: str) -> set[str]:
    """Top-level packages in `sys.modules` after importing `module` in a fresh interpreter."""
    probe = (
        "import importlib, json, sys\n"
        f"importlib.import_module({module!r})\n"
        "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


def test_every_handler_module_is_checked():
    assert {"handlers.api", "handlers.steps", "handlers.ops"} <= set(HANDLER_MODULES)


@pytest.mark.parametrize("module", HANDLER_MODULES)
def test_importing_a_handler_loads_no_heavy_library(module: str):
    loaded = modules_loaded_by_importing(module)
    assert "longhaul" in loaded  # the probe imported the handler for real
    assert loaded.isdisjoint(HEAVY), f"{module} imports {sorted(loaded & set(HEAVY))} at cold start"


def models_built_by_importing(module: str) -> tuple[int, set[str]]:
    """The platform's models (subclasses of `longhaul.core.model.Model`) whose validator exists after importing
    `module` in a fresh interpreter: each was built at import (an instance made at module level, a schema asked for,
    a forward reference resolved by hand), work a cold start pays for whatever the request; and how many of the
    platform's models the import defined."""
    defined, built = _models_probe(
        f"importlib.import_module({module!r})\n",
        "built = {f'{c.__module__}.{c.__qualname__}' for c in walk(Model) if c.__pydantic_complete__}\n"
        "print(json.dumps([len(list(walk(Model))), sorted(built)]))\n",
    )
    return defined, set(built)


def _models_probe(imports: str, report: str) -> Any:
    """What `report` prints as JSON, in a fresh interpreter that ran `imports`; `walk(Model)` yields every model of
    the platform defined by then."""
    probe = (
        "import __future__, importlib, json, pkgutil, sys\n"
        f"{imports}"
        "from longhaul.core.model import Model\n"
        "def walk(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from walk(sub)\n"
        f"{report}"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(result.stdout)


# Small flat models whose instances are module constants (the price tables, a field's default, a zero reading): each
# is built at import, in a few milliseconds.
BUILT_AT_IMPORT = {
    "longhaul.core.budgets.Price",
    "longhaul.core.pricing.AwsPrices",
    "longhaul.core.metering.Metered",
    "longhaul.workflows.invoice_reconciliation.models.ExtractedTotals",
}


@pytest.mark.parametrize("module", HANDLER_MODULES)
def test_importing_a_handler_builds_none_of_the_platforms_large_models(module: str):
    _, built = models_built_by_importing(module)
    assert built <= BUILT_AT_IMPORT


def test_the_probe_sees_the_apis_models_unbuilt():
    defined, built = models_built_by_importing("handlers.api")
    assert defined > 100  # every contract and every workflow's models
    assert len(built) < 5


def test_the_platforms_models_subclass_the_deferred_base():
    """A model subclassing pydantic's `BaseModel` directly is built at import (the probe above would not see it)."""
    direct = []
    for path in sorted(LAMBDAS.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                (isinstance(base, ast.Name) and base.id == "BaseModel")
                or (isinstance(base, ast.Attribute) and base.attr == "BaseModel")
                for base in node.bases
            ):
                direct.append(f"{path.relative_to(LAMBDAS)}:{node.name}")
    assert direct == ["longhaul/core/model.py:Model"]


# Modules of Powertools' other resolvers (AppSync's brings asyncio): `handlers.lean_imports` defers the aggregate
# packages that imported them all, so a handler loads only the resolver and event classes it uses.
UNUSED = ("asyncio",)


@pytest.mark.parametrize("module", ["handlers.api", "handlers.steps"])
def test_a_handler_loads_no_resolver_it_does_not_use(module: str):
    loaded = modules_loaded_by_importing(module)
    assert loaded.isdisjoint(UNUSED), f"{module} imports {sorted(loaded & set(UNUSED))} at cold start"


# What the API function never runs: agents' tools and their loop, the saga, the review lane (a step's), the model
# gateway and its breakers. Its import leaves them to the functions that do (a spec names its tools by path). Reading
# and checking an uploaded archive is imported by the submission that has one.
NOT_THE_APIS = (
    "longhaul.documents.archives",
    "longhaul.engine.agent",
    "longhaul.engine.tools",
    "longhaul.engine.memory",
    "longhaul.engine.saga",
    "longhaul.review.lane",
    "longhaul.storage.breakers",
    "longhaul.core.llm",
)


def test_the_api_imports_no_step_machinery():
    probe = "import handlers.api, json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(result.stdout))
    assert "longhaul.workflows.dispute_resolution.spec" in loaded  # every spec, for the request union
    tools = {m for m in loaded if m.startswith("longhaul.workflows.") and m.endswith(".tools")}
    assert not tools and loaded.isdisjoint(NOT_THE_APIS), sorted(tools | (loaded & set(NOT_THE_APIS)))


# Tracing's SDK, its exporters and the OTLP encoding (protobuf) load with a function's first span, never with its
# handler module; the API function's import loads no OpenTelemetry at all (its spans open on a request, and its
# trace routes read spans through a port), nor the statistics a submission's ETA takes medians with.
TRACING_AT_FIRST_SPAN = ("opentelemetry.sdk", "opentelemetry.exporter", "opentelemetry.instrumentation", "google")
NOT_THE_APIS_COLD = ("opentelemetry", "statistics")


def _loaded_modules(module: str) -> set[str]:
    probe = f"import {module}, json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(result.stdout))


@pytest.mark.parametrize("module", HANDLER_MODULES)
def test_importing_a_handler_loads_no_tracing_sdk(module: str):
    loaded = _loaded_modules(module)
    assert "longhaul.core.model" in loaded  # the probe imported the handler for real
    early = sorted(m for m in loaded if m.startswith(TRACING_AT_FIRST_SPAN))
    assert early == [], f"{module} imports {early[:5]} at cold start"


def test_the_api_imports_no_opentelemetry():
    loaded = _loaded_modules("handlers.api")
    assert {"handlers.api_trace", "longhaul.api.traces", "longhaul.core.tracing", "longhaul.core.timing"} <= loaded
    early = sorted(m for m in loaded if m.partition(".")[0] in NOT_THE_APIS_COLD)
    assert early == [], f"the API imports {early[:5]} at cold start"


def test_modules_that_define_models_keep_their_annotations_evaluated():
    """Under `from __future__ import annotations` every field's annotation is a string that pydantic evaluates when
    it defines the model (a compile and an eval each): a module defining models imports without it (see
    `longhaul/core/model.py`)."""
    modules, late = _models_probe(
        "import handlers, longhaul\n"
        "for package in (handlers, longhaul):\n"
        "    for found in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(found.name)\n",
        "modules = {c.__module__ for c in walk(Model)}\n"
        "late = [m for m in modules if getattr(sys.modules[m], 'annotations', None) is __future__.annotations]\n"
        "print(json.dumps([len(modules), sorted(late)]))\n",
    )
    assert modules > 30  # the probe found the platform's model modules
    assert late == [], f"drop `from __future__ import annotations` from {late}"


# The platform's dataclasses the API function's import defines. Each costs about a millisecond of its cold start
# (a frozen one compiles six generated methods, most of its cost); a small immutable record the API imports is a
# `NamedTuple` (one compiled method) instead. What stays a dataclass is a service with its dependencies, a record
# checked after init or with a default made per instance, or the composition root (which tests replace fields of).
API_DATACLASSES = {
    "longhaul.api.jobs.JobService",
    "longhaul.api.reviews.ReviewService",
    "longhaul.core.ports.ExecutionHistory",  # lists made per instance
    "longhaul.documents.intake.DocumentReader",
    "longhaul.documents.intake.Intake",
    "longhaul.documents.intake.PreparedInput",
    "longhaul.engine.spec.StepSpec",  # checked after init
    "longhaul.engine.spec.Tool",  # checked after init
    "longhaul.engine.spec.WorkflowSpec",  # checked after init, its tools imported once
    "longhaul.operations.admission.Admission",
    "longhaul.operations.admission.DispatchReport",
    "longhaul.services.Services",
    "longhaul.storage.cache.TtlCache",
}


def test_the_api_import_defines_few_dataclasses():
    probe = (
        "import dataclasses, json\n"
        "made = []\n"
        "original = dataclasses._process_class\n"
        "def process(cls, *args, **kwargs):\n"
        "    made.append(f'{cls.__module__}.{cls.__qualname__}')\n"
        "    return original(cls, *args, **kwargs)\n"
        "dataclasses._process_class = process\n"
        "import handlers.api\n"
        "print(json.dumps(sorted(m for m in made if m.startswith(('longhaul.', 'handlers.')))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=LAMBDAS, capture_output=True, text=True, check=True, timeout=120
    )
    made = set(json.loads(result.stdout))
    assert made, "the probe saw no dataclass made"
    assert made <= API_DATACLASSES, sorted(made - API_DATACLASSES)
