# Longhaul — the two promises: `make run` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# Bytecode: uv installs none (compiling all of aws-cdk-lib's 180 MB of modules would take longer than the install); a
# module is compiled at its first import and kept in its __pycache__ (gitignored, never in an asset), so only what is
# imported is ever compiled, and once.
# The browser tests' Chromium: Debian's package (Playwright's own download is not used).
export LONGHAUL_CHROMIUM ?= /usr/bin/chromium

.PHONY: venv lock run test docs-site docs-serve lint types unit runtime infrastructure workflows faults browser replay-tests record eval eval-small eval-ops eval-ops-small contract docs synth openapi bench figures clean

# The installer: uv, pinned, from PyPI into the virtualenv itself (pip when it cannot be had: slower, same files).
# It uses the index pip is configured with (PIP_INDEX_URL, or index-url in pip's configuration), when there is one.
UV_VERSION := 0.13.8
UV := $(BIN)/uv
PIP_INDEX = $(or $(PIP_INDEX_URL),$(shell $(PYTHON) -m pip config get global.index-url 2>/dev/null))
UV_ENV = $(if $(PIP_INDEX),UV_DEFAULT_INDEX=$(PIP_INDEX))
# The lockfiles: every pinned requirement with its hashes, generated from the pins by `make lock`.
LOCK := requirements.lock
CHECKOV_LOCK := requirements-checkov.lock

# Installs `$(1)` (a lockfile, hashes required) into the virtualenv `$(2)`, with uv or else pip, without resolving.
define install_locked
	test -x $(2)/bin/python || $(PYTHON) -m venv $(2)
	@if $(2)/bin/pip install --quiet uv==$(UV_VERSION) >/dev/null 2>&1; then \
	  echo "installing $(1) with uv $(UV_VERSION)"; \
	  $(UV_ENV) $(2)/bin/uv pip install --python $(2)/bin/python --quiet --no-deps --require-hashes -r $(1); \
	else \
	  echo "uv $(UV_VERSION) could not be installed from the package index: installing $(1) with pip (slower)"; \
	  $(2)/bin/pip install --quiet --upgrade pip && $(2)/bin/pip install --quiet --no-deps --require-hashes -r $(1); \
	fi
endef

# The locked requirements, then the domain package and the command line and client (client/) in editable mode, which
# puts `longhaul` in .venv/bin; their dependencies are the locked ones (--no-deps: nothing is looked up by name), and
# setuptools' notice about editable installs is silenced.
$(BIN)/.installed: $(LOCK) pyproject.toml setup.cfg client/pyproject.toml
	$(call install_locked,$(LOCK),$(VENV))
	@echo "installing the domain package and the command line (editable: -e . -e client)"
	@if test -x $(UV); then \
	  PYTHONWARNINGS=ignore $(UV_ENV) $(UV) pip install --python $(BIN)/python --quiet --no-deps -e . -e client; \
	else \
	  PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-deps -e . -e client; \
	fi
	touch $@

venv: $(BIN)/.installed

# checkov pins its own boto3: it gets a virtualenv of its own (tests/infrastructure/test_checkov.py runs it).
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: $(CHECKOV_LOCK)
	$(call install_locked,$(CHECKOV_LOCK),$(CHECKOV_VENV))
	touch $@

# Regenerate the lockfiles from the pins, with the pins' versions (tests/unit/test_lockfiles.py fails when they
# disagree). Universal: one lock for every platform and Python 3.11+ (checkov's: 3.11.5+, as its soupsieve requires),
# with the hashes of each pinned version's files.
lock: $(BIN)/.installed ## regenerate requirements.lock and requirements-checkov.lock after a change of the pins
	@test -x $(UV) || { echo "make lock needs uv ($(UV)), which could not be installed"; exit 1; }
	$(UV_ENV) $(UV) pip compile --quiet --universal --python-version 3.11.5 --generate-hashes \
	  --custom-compile-command "make lock" -c constraints.txt requirements-dev.txt -o $(LOCK)
	$(UV_ENV) $(UV) pip compile --quiet --universal --python-version 3.11.5 --generate-hashes --no-deps \
	  --custom-compile-command "make lock" requirements-checkov.txt -o $(CHECKOV_LOCK)

# LONGHAUL_TIMINGS=1 prints where the seconds went; the clock starts when make does (before the virtualenv check).
run: export LONGHAUL_MAKE_STARTED := $(shell date +%s.%N)
run: $(BIN)/.installed ## start the platform locally (in-memory AWS, API on 127.0.0.1:8000)
	$(BIN)/python -m local

test: $(BIN)/.installed lint docs-site types unit runtime infrastructure workflows faults replay-tests eval-small eval-ops-small browser contract docs ## the one gate CI runs

lint: $(BIN)/.installed ## ruff, and the domain package's import layers (import-linter, contracts in pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=lambdas:client/src $(BIN)/lint-imports --no-cache

types: $(BIN)/.installed
	$(BIN)/mypy

unit: $(BIN)/.installed
	$(BIN)/pytest -q tests/unit

runtime: $(BIN)/.installed ## the local runtime's moto patches and time scaling, on moto's Step Functions interpreter
	$(BIN)/pytest -q tests/runtime

infrastructure: $(BIN)/.installed $(CHECKOV_VENV)/.installed
	$(BIN)/pytest -q tests/infrastructure

workflows: $(BIN)/.installed
	$(BIN)/pytest -q tests/workflows

faults: $(BIN)/.installed
	$(BIN)/pytest -q tests/faults

browser: $(BIN)/.installed ## the web console in headless Chromium; skipped (and said so) when there is no Chromium
	@test -x "$(LONGHAUL_CHROMIUM)" || echo "browser tests SKIPPED: no Chromium at $(LONGHAUL_CHROMIUM) (apt-get install -y chromium; .ci/run installs it)"
	$(BIN)/pytest -q -rs tests/browser

replay-tests: $(BIN)/.installed ## every recorded job (tests/replay/recordings) again on the current code, model answers recorded
	$(BIN)/pytest -q tests/replay

record: $(BIN)/.installed ## record the sample job of each workflow into tests/replay/recordings (accepts an intended change)
	$(BIN)/python -m local.recording

eval: $(BIN)/.installed ## every eval case through the local platform: a table per workflow, evals/results/full.json, gated against evals/baseline.json (EVAL_ARGS="--compare ROUTE_A,ROUTE_B [--repeat K]": routes compared)
	$(BIN)/python -m evals $(EVAL_ARGS)

eval-small: $(BIN)/.installed ## the small eval set (the cases marked small), gated against its baseline
	$(BIN)/python -m evals --small

eval-ops: $(BIN)/.installed ## operational and cost evals: every fault scenario three times (duplicate executions, resumability, DLQ, callbacks, queue waits, cost of retries), gated against evals/ops-baseline.json
	$(BIN)/python -m evals --ops $(EVAL_ARGS)

eval-ops-small: $(BIN)/.installed ## the operational evals with every fault scenario once, gated against their baseline
	$(BIN)/python -m evals --ops --small

contract: $(BIN)/.installed ## Schemathesis against a local platform of its own: all checks, three roles, a fixed seed
	$(BIN)/pytest -q -s tests/contract

# Each document runs on a platform of its own (its own ports and workspace), so documents run in parallel, one per core.
docs: $(BIN)/.installed ## the README's and the manual's commands, in order, against `make run` on ports of their own (tests/docs)
	$(BIN)/pytest -q -n auto tests/docs

# The manual (mkdocs.yml): Material for MkDocs, strict, and nothing fetched at view time. Its one script from
# outside, Mermaid (the diagrams), comes from the npm registry at a pinned version whose tarball's SHA-256 is checked,
# into docs/assets/vendor/ (not committed), with its licence.
MERMAID_VERSION := 11.17.2
MERMAID_SHA256 := 6ad2f42c3fc26bbf9e45cbb6d11898972573ea52b33a5f4ff51952899f950ffd
MERMAID := docs/assets/vendor/mermaid.min.js
$(MERMAID):
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  (cd "$$tmp" && npm pack --silent mermaid@$(MERMAID_VERSION) >/dev/null) && \
	  echo "$(MERMAID_SHA256)  $$tmp/mermaid-$(MERMAID_VERSION).tgz" | sha256sum --check --quiet && \
	  tar -xzf "$$tmp/mermaid-$(MERMAID_VERSION).tgz" -C "$$tmp" package/dist/mermaid.min.js package/LICENSE && \
	  mkdir -p $(@D) && cp "$$tmp/package/LICENSE" $(@D)/mermaid.LICENSE && cp "$$tmp/package/dist/mermaid.min.js" $@

docs-site: $(BIN)/.installed $(MERMAID) ## the manual into site/, strictly: a broken link, a page missing from the nav or an anchor that does not exist fails
	PYTHONPATH=lambdas:client/src NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

docs-serve: $(BIN)/.installed $(MERMAID) ## the manual on http://127.0.0.1:8100, rebuilt as pages (and the code they are generated from) change
	PYTHONPATH=lambdas:client/src NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8100 --watch lambdas --watch client/src --watch local --watch app.py

synth: $(BIN)/.installed ## synthesize the CDK app into cdk.out (offline)
	$(BIN)/python app.py

openapi: $(BIN)/.installed ## regenerate docs/openapi.json from the models
	PYTHONPATH=lambdas $(BIN)/python -c "from handlers.api import openapi_json; print(openapi_json())" > docs/openapi.json

bench: $(BIN)/.installed ## print submit-to-completed time, where a 10-document job's CPU goes (by layer and by function), a 10-document job's spans and what tracing adds to a step invocation, accepted submissions/s, the AWS calls of a submission and the CPU of a queued one, the 202 of 1 to 5,000 inline documents, a 1,000-document job, a child job's overhead over running it alone (transitions and seconds), cost per job at 10/100/1,000 documents, handlers' cold-import times, OCR pages per second, the events long-poll's latency and the command's start-up, the console's weight and job page times, what the local IAM enforcement adds per request, the operators' metrics route after a 1,000-document job and 50 more, a bulk replay's dry run over 200 failed jobs, the usage report over 10,000 jobs, a revoked key's last accepted request, the audit trail's writes per action, a schedule's fire to its job queued, a 100-document job's erasure until its marker is found nowhere, what a tool call's own credentials add, an MCP tools/call of a workflow to its job id, personal data redaction per kept prompt and its cold start, then the lean-paths table (every figure again, with cores and load)
	$(BIN)/python bench/end_to_end.py
	$(BIN)/python bench/where_time_goes.py
	$(BIN)/python bench/tracing.py
	$(BIN)/python bench/submissions.py
	$(BIN)/python bench/submissions.py --hold
	$(BIN)/python bench/submission_calls.py
	$(BIN)/python bench/large_submission.py
	$(BIN)/python bench/large_job.py
	$(BIN)/python bench/cost.py
	$(BIN)/python bench/pause.py
	$(BIN)/python bench/children.py
	$(BIN)/python bench/cold_start.py
	$(BIN)/python bench/ocr.py
	$(BIN)/python bench/long_poll.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/iam_enforcement.py
	$(BIN)/python bench/ops_metrics.py
	$(BIN)/python bench/bulk.py
	$(BIN)/python bench/report.py
	$(BIN)/python bench/revocation.py
	$(BIN)/python bench/audit.py
	$(BIN)/python bench/mcp_call.py
	$(BIN)/python bench/redaction.py
	$(BIN)/python bench/erasure.py
	$(BIN)/python bench/tool_credentials.py
	$(BIN)/python bench/schedules.py
	$(BIN)/python bench/table.py

figures: $(BIN)/.installed ## measure and paste the figures the docs quote (bench/figures.py; minutes)
	$(BIN)/python bench/figures.py

clean:
	rm -rf site cdk.out .local/synth .pytest_cache .ruff_cache .mypy_cache stacks/bytecode/node_modules $(CHECKOV_VENV)
