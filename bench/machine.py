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
