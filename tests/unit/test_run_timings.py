"""`LONGHAUL_TIMINGS=1 make run`: the report of where the seconds to serving went (`local.__main__.timings_report`)."""

from __future__ import annotations

import time

from local.__main__ import timings_report


def test_every_phase_is_reported_and_the_rest_is_other() -> None:
    now = time.time()
    phases = {"synth_reused": 0.1, "moto_start": 0.5, "deploy": 2.0, "seed": 0.2, "front_door": 0.05, "total": 2.9}
    report = timings_report(phases, make_started=str(now - 6.0), started=now - 5.0, imported=now - 3.5)
    lines = report.splitlines()
    assert lines[0] == "Where the seconds went (LONGHAUL_TIMINGS=1):"
    assert "make: the virtualenv check (or install), Python start" in lines[1] and lines[1].endswith("1.00 s")
    assert lines[2].endswith("1.50 s")  # imports
    assert any(line.lstrip().startswith("synthesis: cached assembly re-used") for line in lines)
    assert not any(line.lstrip().startswith("total ") and "2.90" in line for line in lines)  # the platform's own total
    other = float(lines[-2].split()[-2])
    assert 0.0 <= other <= 6.0 - (1.0 + 1.5 + 2.85) + 0.5
    assert lines[-1].lstrip().startswith("total") and 5.9 <= float(lines[-1].split()[-2]) < 7


def test_without_make_the_clock_starts_with_python() -> None:
    now = time.time()
    report = timings_report({"synth": 20.0}, make_started="", started=now - 21.0, imported=now - 20.5)
    assert "make:" not in report
    assert "synthesis (no cached assembly for these sources)" in report
