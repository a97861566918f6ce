"""What a figure was measured on, printed with every figure the docs quote (`--markdown` of the benches)."""

from __future__ import annotations

import os
import platform
from datetime import date
from pathlib import Path


def cpu_model() -> str:
    """The processor's model name (Linux), else the machine type."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.lower().startswith(("model name", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.machine() or "unknown processor"


def machine() -> str:
    """E.g. `2 cores (AMD EPYC 7B13), load average 1.2, Python 3.11.7, 2026-12-01`."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), load average {load:.1f}, Python {platform.python_version()}, "
        f"{date.today().isoformat()}"
    )


class CpuMeter:
    """CPU a process used, and the share of the machine's CPU time its hypervisor took (steal), between `start` and
    `stop` (Linux `/proc`; elsewhere both read as None).

    A GIL-bound platform's throughput is one core's worth of work divided by the work per request: the CPU per
    request says which of the two changed (steal says whether the hypervisor took the core away meanwhile)."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._begin: tuple[float, list[int]] | None = None
        self.cpu_seconds: float | None = None
        self.steal: float | None = None

    def _read(self) -> tuple[float, list[int]] | None:
        try:
            fields = Path(f"/proc/{self._pid}/stat").read_text().rsplit(")", 1)[1].split()
            machine_times = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        except (OSError, IndexError, ValueError):
            return None
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks, machine_times  # utime + stime (fields 14, 15)

    def start(self) -> None:
        self._begin = self._read()

    def stop(self) -> None:
        end = self._read()
        if self._begin is None or end is None:
            return
        self.cpu_seconds = end[0] - self._begin[0]
        spent = [b - a for a, b in zip(self._begin[1], end[1], strict=False)]
        total = sum(spent[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
        self.steal = spent[7] / total if total > 0 and len(spent) > 7 else None
