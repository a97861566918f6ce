"""Benchmark: what checking and reading a ZIP archive of documents costs (S3 in moto, in process).

    .venv/bin/python bench/archive.py --documents 5000 [--markdown]

Builds an archive of `--documents` small text documents in folders (plus a 40 MiB member of incompressible bytes,
so the directory sits far from the start of a large object), uploads it, then times `Intake.archive` — what the API
function does at submission: the end record and central directory by ranged GETs — and reading members back with
`read_document` (what a per-document step does). Prints the GETs and bytes fetched and CPU milliseconds; the
document limit is lifted to `--documents` for the run. `--markdown` prints the sentence the README quotes, with the
machine it was measured on (`make figures` pastes it). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lambdas"))

import boto3  # noqa: E402
from machine import machine  # noqa: E402
from moto import mock_aws  # noqa: E402

from longhaul.core import limits  # noqa: E402
from longhaul.core.contracts import ArchiveInput  # noqa: E402
from longhaul.documents.intake import Intake, read_document  # noqa: E402
from longhaul.storage.artifacts import ArtifactStore  # noqa: E402

BUCKET = "bench-artifacts"
UPLOAD_ID = "up_" + "b" * 32
KEY = f"uploads/tenant/{UPLOAD_ID}"


class MeteredStore(ArtifactStore):
    def __init__(self, s3: Any, bucket: str) -> None:
        super().__init__(s3, bucket)
        self.gets = 0
        self.bytes = 0

    def get_range(self, key: str, start: int, end: int) -> bytes:
        data = super().get_range(key, start, end)
        self.gets, self.bytes = self.gets + 1, self.bytes + len(data)
        return data


def build(documents: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("scans/large.txt", os.urandom(40 * 1024 * 1024))
        for n in range(documents - 1):
            archive.writestr(
                f"contracts/{n // 100:03d}/contract-{n:05d}.txt", f"Contract {n}: the cap is {n} EUR.\n" * 20
            )
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=5000)
    parser.add_argument("--markdown", action="store_true", help="print the README's sentence")
    args = parser.parse_args()
    limits.MAX_DOCUMENTS = max(limits.MAX_DOCUMENTS, args.documents)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        store = MeteredStore(s3, BUCKET)
        data = build(args.documents)
        store.put_bytes(KEY, data, "application/zip")

        intake = Intake(job_id="job-bench", tenant_id="tenant", artifacts=store)
        started = time.process_time()
        documents = intake.archive(ArchiveInput(upload_id=UPLOAD_ID), first_index=0, loc=["archive"])
        intake.check()
        check_ms = (time.process_time() - started) * 1000
        check = (store.gets, store.bytes)
        if not args.markdown:
            print(f"archive: {len(data) / 2**20:.1f} MiB, {len(documents)} documents")
            print(f"submission check: {check[0]} ranged GETs, {check[1] / 1024:.0f} KiB fetched, {check_ms:.0f} ms CPU")

        store.gets = store.bytes = 0
        sample = documents[1 : 1 + 200]
        started = time.process_time()
        for document in sample:
            read_document(store, document)
        read_ms = (time.process_time() - started) * 1000 / len(sample)
        if args.markdown:
            print(
                f"`.venv/bin/python bench/archive.py --documents {args.documents}` prints what that costs (here, a "
                f"{len(data) / 2**20:.0f} MiB archive of {len(documents):,} documents: the check is {check[0]} ranged "
                f"GETs, {check[1] / 1024:.0f} KiB and {check_ms:.0f} ms of CPU against moto in process; a member read "
                f"is {store.gets / len(sample):.0f} ranged GETs; measured on {machine()})."
            )
            return
        print(
            f"member reads: {store.gets / len(sample):.0f} ranged GETs and {store.bytes / len(sample):.0f} bytes "
            f"a document, {read_ms:.1f} ms CPU a document (moto in process)"
        )


if __name__ == "__main__":
    main()
