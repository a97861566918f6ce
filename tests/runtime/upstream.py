"""What a patch of an upstream library is pinned to: a digest of the upstream function's source, so that a new
release that changes it fails the pin ("re-check") instead of silently diverging from what the patch repeats."""

from __future__ import annotations

import hashlib
import inspect
import textwrap
from typing import Any


def digest(fn: Any) -> str:
    """The first 16 hex digits of the SHA-256 of `fn`'s dedented source."""
    return hashlib.sha256(textwrap.dedent(inspect.getsource(fn)).encode()).hexdigest()[:16]
