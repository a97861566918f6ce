"""Fault injection, a test hook of the local runtime (never configured in AWS).

Spec: `<step>[#<item>]=<kind>[x<times>],…` e.g. `draft_answer=transientx2,extract_evidence#3=invalid-input`.
`kind` is a failure class name (errors.BY_KIND); without `x<times>` the fault fires on every attempt.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from longhaul.errors import BY_KIND, LonghaulError

_RULE = re.compile(r"^(?P<step>[a-z_]+)(?:#(?P<item>\d+))?=(?P<kind>[a-z\-]+)(?:x(?P<times>\d+))?$")


@dataclass
class Fault:
    step: str
    item: int | None
    kind: str
    remaining: int | None  # None: always


class FaultInjector:
    def __init__(self, spec: str = "") -> None:
        self._lock = threading.Lock()
        self.faults = self.parse(spec)

    @staticmethod
    def parse(spec: str) -> list[Fault]:
        faults = []
        for rule in filter(None, (part.strip() for part in spec.split(","))):
            match = _RULE.match(rule)
            if not match or match["kind"] not in BY_KIND:
                raise ValueError(
                    f"bad fault {rule!r}: expected <step>[#<item>]=<kind>[x<times>], kinds: {sorted(BY_KIND)}"
                )
            item = int(match["item"]) if match["item"] else None
            times = int(match["times"]) if match["times"] else None
            faults.append(Fault(match["step"], item, match["kind"], times))
        return faults

    def check(self, step: str, item: int | None) -> None:
        """Raise the configured error for this step (and item), if any remains."""
        with self._lock:
            for fault in self.faults:
                if fault.step != step or (fault.item is not None and fault.item != item):
                    continue
                if fault.remaining is not None:
                    if fault.remaining <= 0:
                        continue
                    fault.remaining -= 1
                error: type[LonghaulError] = BY_KIND[fault.kind]
                raise error(f"injected {fault.kind} fault", step=step, item=item)


_active = FaultInjector()


def install(injector: FaultInjector) -> None:
    global _active
    _active = injector


def active() -> FaultInjector:
    return _active
