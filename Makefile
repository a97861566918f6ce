# Longhaul — the two promises: `make run` and `make test` work on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: run test lint types unit runtime infrastructure workflows faults docs synth openapi bench figures clean

$(BIN)/.installed: requirements.txt requirements-dev.txt lambdas/requirements.txt lambdas/workers/ocr/requirements.txt constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-dev.txt -c constraints.txt
	touch $@

venv: $(BIN)/.installed

run: $(BIN)/.installed ## start the platform locally (in-memory AWS, API on 127.0.0.1:8000)
	$(BIN)/python -m local

test: $(BIN)/.installed lint types unit runtime infrastructure workflows faults docs ## the one gate CI runs

lint: $(BIN)/.installed ## ruff, and the domain package's import layers (import-linter, contracts in pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PYTHONPATH=lambdas $(BIN)/lint-imports --no-cache

types: $(BIN)/.installed
	$(BIN)/mypy

unit: $(BIN)/.installed
	$(BIN)/pytest -q tests/unit

runtime: $(BIN)/.installed ## the local runtime's moto patches and time scaling, on moto's Step Functions interpreter
	$(BIN)/pytest -q tests/runtime

infrastructure: $(BIN)/.installed
	$(BIN)/pytest -q tests/infrastructure

workflows: $(BIN)/.installed
	$(BIN)/pytest -q tests/workflows

faults: $(BIN)/.installed
	$(BIN)/pytest -q tests/faults

docs: $(BIN)/.installed ## the README's commands, in order, against `make run` on ports of their own (tests/docs)
	$(BIN)/pytest -q tests/docs

synth: $(BIN)/.installed ## synthesize the CDK app into cdk.out (offline)
	$(BIN)/python app.py

openapi: $(BIN)/.installed ## regenerate docs/openapi.json from the models
	PYTHONPATH=lambdas $(BIN)/python -c "from handlers.api import openapi_json; print(openapi_json())" > docs/openapi.json

bench: $(BIN)/.installed ## print submit-to-completed time, accepted submissions/s, a 1,000-document job, cost per job at 10/100/1,000 documents, handlers' cold-import times, OCR pages per second
	$(BIN)/python bench/end_to_end.py
	$(BIN)/python bench/submissions.py
	$(BIN)/python bench/submissions.py --hold
	$(BIN)/python bench/large_job.py
	$(BIN)/python bench/cost.py
	$(BIN)/python bench/cold_start.py
	$(BIN)/python bench/ocr.py

figures: $(BIN)/.installed ## measure and paste the figures the README quotes (bench/figures.py; minutes)
	$(BIN)/python bench/figures.py

clean:
	rm -rf cdk.out .pytest_cache .ruff_cache .mypy_cache stacks/bytecode/node_modules
