"""Submit a job with the typed Python client, follow it to its end, and read its result.

Against the local platform (`make run`), with the address and key it prints:

    LONGHAUL_URL=http://127.0.0.1:8000 LONGHAUL_API_KEY=lh_local_alpha_5f3a9c2e7b1d4068 \
        .venv/bin/python docs/examples/submit_a_job.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from longhaul_client import LonghaulClient

REQUEST = Path(__file__).resolve().parents[2] / "samples" / "request.json"


def main() -> None:
    request = json.loads(REQUEST.read_text())  # a document-analysis job: a question over three documents
    with LonghaulClient(os.environ["LONGHAUL_URL"], os.environ["LONGHAUL_API_KEY"]) as longhaul:
        accepted = longhaul.submit(request)
        print("submitted", accepted.job_id, accepted.status)

        job = longhaul.wait(accepted.job_id, timeout=300, on_event=lambda event: print(" ", event.type))
        print("finished", job.status)
        assert job.status == "completed", job.error

        result = longhaul.result(job.job_id).result
        print(result.model_dump()["answer"][:200])


if __name__ == "__main__":
    main()
