"""What a function keeps of a lookup between its invocations, for a stated time: API keys and tenant policies.

A submission reads the caller's key and its tenant's policy; both change rarely (an operator revokes a key, changes
a policy), and each read is a round trip. A warm API function answers them from here for `LOOKUP_CACHE_SECONDS`:
a revoked key stops authenticating, and a changed policy applies, at most that long after the change in every
sandbox (at once in the sandbox that wrote the policy). What is not found is not kept: a key created a moment ago
authenticates at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from longhaul.core.clock import Clock

LOOKUP_CACHE_SECONDS = 10.0
V = TypeVar("V")


@dataclass
class TtlCache(Generic[V]):
    """Values by key, each kept for `seconds` after it was read (measured on `clock`); thread-safe."""

    clock: Clock
    seconds: float = LOOKUP_CACHE_SECONDS
    _entries: dict[str, tuple[datetime, V]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: str, read: Callable[[], V | None]) -> V | None:
        """The kept value of `key` while it is fresh, else `read()` (kept unless None)."""
        now = self.clock.now()
        with self._lock:
            found = self._entries.get(key)
        if found is not None and now < found[0]:
            return found[1]
        value = read()
        with self._lock:
            if value is None:
                self._entries.pop(key, None)
            else:
                self._entries[key] = (now + timedelta(seconds=self.seconds), value)
        return value

    def forget(self, key: str) -> None:
        with self._lock:
            self._entries.pop(key, None)
