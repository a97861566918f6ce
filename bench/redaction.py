"""Benchmark: what redacting personal data costs (`longhaul.core.redaction`, the tenant policy's `redact`).

    .venv/bin/python bench/redaction.py [--runs 200] [--cold 5]

- per kept prompt: what the model gateway does to keep one call under a policy redacting every kind (the system
  prompt, the prompt and the answer redacted with one `Redactor`), on a document-analysis prompt built from
  `samples/request.json`'s documents plus a letter holding e-mail addresses, IBANs, phone numbers, a card number and
  a name (about 6 KB), and on one four times its size; p50 and p95 in milliseconds over `--runs` runs;
- cold start: in a fresh interpreter (as a Lambda sandbox's first redaction), importing the module and the first
  redaction of that prompt, which imports the detection libraries and compiles the patterns; the median of `--cold`
  interpreters. Twice: after what every step function has imported before its first model call (boto3, pydantic,
  Powertools, the OpenTelemetry SDK: what redaction adds to a step's cold start), and in a bare interpreter; with
  each library's own import time (bare) beside it.
Prints the targets (issue 46: ≤ 20 ms per kept prompt, ≤ 300 ms cold) and the machine and its load. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas"), str(ROOT / "bench")]

from machine import machine  # noqa: E402

from longhaul.core.redaction import KINDS, Redactor  # noqa: E402

PER_PROMPT_TARGET_MS, COLD_TARGET_MS = 20.0, 300.0
LETTER = (
    "Payment details. Please pay every invoice to IBAN DE89 3704 0044 0532 0130 00, or in pounds to "
    "GB82WEST12345698765432. Questions go to billing@northwind.example or accounts@northwind.example, or call "
    "+44 20 7946 0958 or (415) 555-2671. Card on file 4111 1111 1111 1111. Contact: Priya Natarajan. Our portal "
    "logs your address 192.168.1.20. Invoice INV-2024-000123 of 2024-01-15 for 1,234.56 EUR is due in 30 days.\n"
)
SYSTEM = "You answer questions about the documents given, citing the passages you rely on by their ids."


def prompt(copies: int = 1) -> str:
    request = json.loads((ROOT / "samples" / "request.json").read_text())
    documents = [d["text"] for d in request["input"]["documents"]]
    passages = "\n\n".join(f"[d{i}] {text}" for i, text in enumerate([*documents, LETTER] * copies))
    return f"Question: {request['input']['question']}\n\nPassages:\n{passages}"


ANSWER = json.dumps({"answer": "Pay DE89 3704 0044 0532 0130 00; ask billing@northwind.example.", "claims": []})


def keep(text: str) -> None:
    """What `ModelCalls._keep` does for one call: the prompt's texts and the answer, through one redactor."""
    redactor = Redactor(KINDS)
    redactor.redact(SYSTEM)
    redactor.redact(text)
    redactor.redact(ANSWER)


def per_prompt(text: str, runs: int) -> tuple[float, float]:
    keep(text)  # warm: libraries imported, patterns compiled
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        keep(text)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


COLD = """
import sys, time, json
sys.path[:0] = {paths!r}
{preload}
start = time.perf_counter()
from longhaul.core.redaction import KINDS, Redactor
imported = time.perf_counter()
r = Redactor(KINDS); r.redact({system!r}); r.redact({prompt!r}); r.redact({answer!r})
done = time.perf_counter()
print(json.dumps({{"import_ms": (imported - start) * 1000, "first_ms": (done - imported) * 1000}}))
"""
LIBRARY = "import sys, time; s = time.perf_counter(); import {module}; print((time.perf_counter() - s) * 1000)"


# What a step function has imported when its step first calls a model (its handler, the SDKs it uses).
STEP_IMPORTS = "import boto3, pydantic, aws_lambda_powertools.logging, opentelemetry.sdk.trace"


def cold(text: str, runs: int, preload: str = "") -> tuple[float, float]:
    code = COLD.format(paths=[str(ROOT / "lambdas")], preload=preload, system=SYSTEM, prompt=text, answer=ANSWER)
    found = [json.loads(subprocess.check_output([sys.executable, "-c", code], text=True)) for _ in range(runs)]
    return statistics.median(f["import_ms"] for f in found), statistics.median(f["first_ms"] for f in found)


def library(module: str, runs: int) -> float:
    command = [sys.executable, "-c", LIBRARY.format(module=module)]
    return statistics.median(float(subprocess.check_output(command, text=True)) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cold", type=int, default=5)
    args = parser.parse_args()
    small, large = prompt(), prompt(4)
    print(f"Redaction of personal data (kinds: {', '.join(KINDS)}) — {machine()}")
    for name, text in (("kept prompt", small), ("kept prompt ×4", large)):
        p50, p95 = per_prompt(text, args.runs)
        print(
            f"  {name:<15} {len(text) / 1024:5.1f} KB: p50 {p50:6.2f} ms, p95 {p95:6.2f} ms "
            f"(target p50 ≤ {PER_PROMPT_TARGET_MS:.0f} ms)"
        )
    for name, preload in (("in a step function", STEP_IMPORTS), ("bare interpreter", "")):
        imported, first = cold(small, args.cold, preload)
        print(
            f"  cold start, {name}: import {imported:.1f} ms + first redaction {first:.1f} ms = "
            f"{imported + first:.1f} ms (target ≤ {COLD_TARGET_MS:.0f} ms; median of {args.cold} interpreters)"
        )
    for module in ("phonenumbers", "stdnum.iban, stdnum.luhn", "email_validator"):
        print(f"    of which import {module}: {library(module, args.cold):.1f} ms")


if __name__ == "__main__":
    main()
