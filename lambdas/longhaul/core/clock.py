"""The clock port: injected so tests can control time."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_iso(text: str) -> datetime:
    """The inverse of `iso`."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# Simulated work (the offline model's writing pace) waits through this; the local runtime replaces it with its scaled
# wait, so the local clock's time scale applies to it as to every other local wait.
_pause: Callable[[float], object] = time.sleep


def pause(seconds: float) -> None:
    """Wait `seconds` of simulated work (real time on AWS; scaled locally)."""
    if seconds > 0:
        _pause(seconds)


def set_pause(wait: Callable[[float], object] | None) -> None:
    """Install the wait `pause` uses (None: real time)."""
    global _pause
    _pause = wait or time.sleep
