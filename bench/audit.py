"""Benchmark: what recording an action in the audit trail costs: DynamoDB writes and reads per action, and the
append's latency.

    .venv/bin/python bench/audit.py --actions 500

In-process moto (no server; each DynamoDB operation atomic, as the local platform makes it), the jobs table's key
schema and `by_tenant` index. Every DynamoDB call the store makes is counted by botocore's `before-call` event (so the
figure is what reached DynamoDB, not what the store believes). Three runs: one function appending alone, two functions
taking turns (as the API's concurrent functions do), and four threads appending at once (the races the conditional
write settles: a lost race costs a failed write and a read, then the append again). Prints writes and reads per
action and the append's p50/p95 in milliseconds, with the machine and its load; then checks each chain verifies.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "lambdas"), str(ROOT / "bench")]

os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
os.environ.pop("AWS_ENDPOINT_URL", None)

import boto3  # noqa: E402
from machine import machine  # noqa: E402
from moto import mock_aws  # noqa: E402

from local.moto_patches.dynamodb import serialize_dynamodb_operations  # noqa: E402
from longhaul.core.audit import AuditActor  # noqa: E402
from longhaul.storage.audit import Action, AuditStore  # noqa: E402

WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"})
READS = frozenset({"GetItem", "Query", "Scan", "TransactGetItems", "BatchGetItem"})
ACTOR = AuditActor(tenant_id="ops", role="operator", key_id="0123456789ab")


def _table(name: str) -> Any:
    dynamodb = boto3.resource("dynamodb")
    keys = [("pk", "HASH"), ("sk", "RANGE")]
    return dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": a, "KeyType": t} for a, t in keys],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "gsi1pk", "gsi1sk")],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_tenant",
                "KeySchema": [
                    {"AttributeName": "gsi1pk", "KeyType": "HASH"},
                    {"AttributeName": "gsi1sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _counted(table: Any) -> Counter[str]:
    calls: Counter[str] = Counter()

    def count(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    table.meta.client.meta.events.register("before-call.dynamodb.*", count)
    return calls


def _action(n: int) -> Action:
    return Action(
        actor=ACTOR, action="POST /v1/ops/jobs/{job_id}/replay", target=f"/v1/ops/jobs/job_{n}/replay", outcome=202,
        tenant_id=f"tenant-{n % 7}", job_id=f"job_{n}", request_id=f"req-{n}", source_ip="192.0.2.10",
    )  # fmt: skip


def _run(name: str, actions: int, stores: list[AuditStore], calls: Counter[str], *, threads: bool) -> str:
    latencies: list[float] = []
    lock = threading.Lock()

    def append(store: AuditStore, n: int) -> None:
        started = time.perf_counter()
        store.append(_action(n))
        with lock:
            latencies.append((time.perf_counter() - started) * 1000)

    calls.clear()
    if threads:
        per = actions // len(stores)

        def worker(index: int) -> None:
            for n in range(per):
                append(stores[index], index * per + n)

        running = [threading.Thread(target=worker, args=(i,)) for i in range(len(stores))]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    else:
        for n in range(actions):
            append(stores[n % len(stores)], n)
    done = len(latencies)
    writes = sum(v for k, v in calls.items() if k in WRITES)
    reads = sum(v for k, v in calls.items() if k in READS)
    checked = stores[0].verify()
    p50 = statistics.median(latencies)
    p95 = statistics.quantiles(latencies, n=20)[-1]
    whole = checked.ok and checked.entries == done + 1  # and the warm-up's entry
    verdict = "holds" if whole else f"BROKEN {checked.problems[:3]}"
    return f"{name:<34} {done:>7} {writes / done:>9.2f} {reads / done:>8.2f} {p50:>8.2f} {p95:>8.2f}  {verdict}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--actions", type=int, default=500)
    args = parser.parse_args()
    rows = []
    serialize_dynamodb_operations()  # each operation atomic, as on AWS and on the local platform
    with mock_aws():
        for name, functions, threads in (
            ("one function", 1, False),
            ("two functions taking turns", 2, False),
            ("four threads at once", 4, True),
        ):
            table = _table(name.replace(" ", "-"))
            calls = _counted(table)
            stores = [AuditStore(table) for _ in range(functions)]
            stores[0].append(_action(-1))  # warm-up: clients, models (not counted)
            rows.append(_run(name, args.actions, stores, calls, threads=threads))
    print(f"machine: {machine()}")
    print("audit append (in-process moto; the figure that matters is DynamoDB writes per action: target <= 1)")
    print(f"{'run':<34} {'actions':>7} {'writes/a':>9} {'reads/a':>8} {'p50 ms':>8} {'p95 ms':>8}  chain")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
