# Longhaul — the two promises: `make run` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1
# The browser tests' Chromium: Debian's package (Playwright's own download is not used).
export LONGHAUL_CHROMIUM ?= /usr/bin/chromium

.PHONY: run test lint types unit runtime infrastructure workflows faults browser replay-tests record eval eval-small contract docs synth openapi bench figures clean

# The pinned requirements, then the domain package and the command line and client (client/) in editable mode, which
# puts `longhaul` in .venv/bin; their dependencies are the pinned ones (--no-deps: nothing is looked up by name), and
# setuptools' notice about editable installs is silenced.
$(BIN)/.installed: requirements.txt requirements-dev.txt lambdas/requirements.txt lambdas/workers/ocr/requirements.txt constraints.txt pyproject.toml setup.cfg client/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt -c constraints.txt
	PYTHONWARNINGS=ignore $(BIN)/pip install --quiet --no-deps -e . -e client
	touch $@

venv: $(BIN)/.installed

# checkov pins its own boto3: it gets a virtualenv of its own (tests/infrastructure/test_checkov.py runs it).
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOV_VENV)/bin/pip install --quiet --no-deps -r requirements-checkov.txt
	touch $@

run: $(BIN)/.installed ## start the platform locally (in-memory AWS, API on 127.0.0.1:8000)
	$(BIN)/python -m local

test: $(BIN)/.installed lint types unit runtime infrastructure workflows faults replay-tests eval-small browser contract docs ## the one gate CI runs

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

eval: $(BIN)/.installed ## every eval case through the local platform: a table per workflow, evals/results/full.json, gated against evals/baseline.json
	$(BIN)/python -m evals $(EVAL_ARGS)

eval-small: $(BIN)/.installed ## the small eval set (the cases marked small), gated against its baseline
	$(BIN)/python -m evals --small

contract: $(BIN)/.installed ## Schemathesis against a local platform of its own: all checks, three roles, a fixed seed
	$(BIN)/pytest -q -s tests/contract

docs: $(BIN)/.installed ## the README's and the manual's commands, in order, against `make run` on ports of their own (tests/docs)
	$(BIN)/pytest -q tests/docs

synth: $(BIN)/.installed ## synthesize the CDK app into cdk.out (offline)
	$(BIN)/python app.py

openapi: $(BIN)/.installed ## regenerate docs/openapi.json from the models
	PYTHONPATH=lambdas $(BIN)/python -c "from handlers.api import openapi_json; print(openapi_json())" > docs/openapi.json

bench: $(BIN)/.installed ## print submit-to-completed time, where a 10-document job's CPU goes (by layer and by function), accepted submissions/s, the AWS calls of a submission and the CPU of a queued one, the 202 of 1 to 5,000 inline documents, a 1,000-document job, cost per job at 10/100/1,000 documents, handlers' cold-import times, OCR pages per second, the events long-poll's latency and the command's start-up, the console's weight and job page times, what the local IAM enforcement adds per request, the operators' metrics route after a 1,000-document job and 50 more, then the lean-paths table (every figure again, with cores and load)
	$(BIN)/python bench/end_to_end.py
	$(BIN)/python bench/where_time_goes.py
	$(BIN)/python bench/submissions.py
	$(BIN)/python bench/submissions.py --hold
	$(BIN)/python bench/submission_calls.py
	$(BIN)/python bench/large_submission.py
	$(BIN)/python bench/large_job.py
	$(BIN)/python bench/cost.py
	$(BIN)/python bench/cold_start.py
	$(BIN)/python bench/ocr.py
	$(BIN)/python bench/long_poll.py
	$(BIN)/python bench/console.py
	$(BIN)/python bench/iam_enforcement.py
	$(BIN)/python bench/ops_metrics.py
	$(BIN)/python bench/table.py

figures: $(BIN)/.installed ## measure and paste the figures the docs quote (bench/figures.py; minutes)
	$(BIN)/python bench/figures.py

clean:
	rm -rf cdk.out .pytest_cache .ruff_cache .mypy_cache stacks/bytecode/node_modules $(CHECKOV_VENV)
