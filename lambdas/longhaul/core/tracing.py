"""X-Ray subsegments for the work inside an invocation: model calls, AWS calls, webhook attempts.

Lambda's and Step Functions' active tracing record each invocation and each state; what happens inside a function
becomes visible only through the X-Ray SDK. The SDK is shipped in the asset without its botocore (`--no-deps`, the
runtime's is used: `stacks/bundling.py`) and imported lazily: on the first subsegment of a traced invocation (one
whose sandbox has `_X_AMZN_TRACE_ID`), which also patches botocore so each AWS call is a subsegment. A function
that opens none (the health route) never pays for the import; one that does pays it once per sandbox
(`bench/cold_start.py` prints it). Why not Powertools' Tracer: it imports the SDK when the module is loaded, and its
`[tracer]` extra would bundle a second botocore. Why not ADOT: its layer instruments every library at start-up, a
larger cold start than this.

Locally (no trace header, no daemon) every subsegment is a no-op that still accepts annotations, so the code path
is the same; the correlation id (`longhaul.core.correlation`) is an annotation of each subsegment, which makes a
job's traces searchable by its id (`annotation.correlation_id = "…"`) as well as by `annotation.job_id`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from longhaul.core import correlation

LOG = logging.getLogger(__name__)
#: Set by Lambda when the invocation is traced: its X-Ray trace header (recorded on failures and compensations).
TRACE_HEADER_ENV = "_X_AMZN_TRACE_ID"
#: Set by Lambda: the function's name (tracing is on only inside a Lambda function).
FUNCTION_NAME_ENV = "AWS_LAMBDA_FUNCTION_NAME"
_lock = threading.Lock()
_recorder: Any = None
_unavailable = False


class Subsegment:
    """A subsegment's annotations (searchable in X-Ray); a no-op when the invocation is not traced."""

    def __init__(self, real: Any = None) -> None:
        self._real = real

    def annotate(self, **values: str | int | float | bool | None) -> None:
        if self._real is None:
            return
        for key, value in values.items():
            if value is not None:
                self._real.put_annotation(key, value)


def _traced() -> bool:
    return bool(os.environ.get(TRACE_HEADER_ENV)) and bool(os.environ.get(FUNCTION_NAME_ENV))


def recorder() -> Any:
    """The X-Ray recorder, imported (and botocore patched) on first use; None when the SDK is not installed."""
    global _recorder, _unavailable
    if _recorder is not None or _unavailable:
        return _recorder
    with _lock:
        if _recorder is None and not _unavailable:
            try:
                from aws_xray_sdk.core import patch, xray_recorder

                xray_recorder.configure(context_missing="IGNORE_ERROR")
                patch(["botocore"])  # each AWS call of the platform's clients: a subsegment
                _recorder = xray_recorder
            except ImportError:
                _unavailable = True
    return _recorder


@contextmanager
def subsegment(name: str, **annotations: str | int | float | bool | None) -> Iterator[Subsegment]:
    """`with subsegment("model_call", route=…, model=…) as s: …; s.annotate(input_tokens=…)`."""
    xray = recorder() if _traced() else None
    if xray is None:
        yield Subsegment()
        return
    with xray.in_subsegment(name) as real:
        segment = Subsegment(real)
        segment.annotate(correlation_id=correlation.current(), **annotations)
        yield segment
