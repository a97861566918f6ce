"""The lockfiles `make venv` installs from hold exactly the pinned versions: a pin changed without `make lock`
fails here.

`requirements.lock` is `requirements-dev.txt` resolved under `constraints.txt`, with hashes; `requirements-checkov.lock`
is `requirements-checkov.txt` (a full pinned set, installed without dependencies), with hashes. A static check: no
network, no resolver.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")

STALE = "stale: run `make lock` after changing the pins"


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path, *, follow: bool = True) -> dict[str, str]:
    """`name==version` of a requirements file (names normalized), with the files its `-r`/`-c` lines name."""
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if follow and line.startswith(("-r ", "-c ")):
            found.update(pins(path.parent / line[3:].strip()))
        elif match := _PIN.match(line):
            found[_name(match[1])] = match[2]
    return found


def locked(path: Path) -> dict[str, tuple[str, str, int]]:
    """name -> (version, marker, number of hashes) of a lockfile."""
    entries: dict[str, tuple[str, str, int]] = {}
    current = ""
    for line in path.read_text().splitlines():
        if match := _PIN.match(line):
            current = _name(match[1])
            entries[current] = (match[2], (match[3] or "").strip(), 0)
        elif line.strip().startswith("--hash=sha256:") and current:
            version, marker, hashes = entries[current]
            entries[current] = (version, marker, hashes + 1)
    return entries


def test_the_lock_has_every_pinned_requirement_at_its_version() -> None:
    wanted = pins(ROOT / "requirements-dev.txt")
    lock = locked(ROOT / "requirements.lock")
    assert wanted, "no pins read from requirements-dev.txt"
    wrong = {n: (v, lock.get(n, ("missing",))[0]) for n, v in wanted.items() if lock.get(n, ("",))[0] != v}
    assert wrong == {}, f"requirements.lock is {STALE} (name: (pinned, locked)): {wrong}"


def test_the_lock_holds_only_the_constraints_versions() -> None:
    """Every locked package is pinned in constraints.txt at that version (platform-conditional ones aside)."""
    constraints = pins(ROOT / "constraints.txt", follow=False)
    lock = locked(ROOT / "requirements.lock")
    wrong = {
        n: (constraints.get(n, "unpinned"), version)
        for n, (version, marker, _) in lock.items()
        if constraints.get(n) != version and not (marker and n not in constraints)
    }
    assert wrong == {}, (
        f"requirements.lock is {STALE}, or constraints.txt lacks a pin (name: (pinned, locked)): {wrong}"
    )


def test_the_checkov_lock_is_its_pinned_set() -> None:
    wanted = pins(ROOT / "requirements-checkov.txt", follow=False)
    lock = {n: v for n, (v, _, _) in locked(ROOT / "requirements-checkov.lock").items()}
    assert len(wanted) > 50, "requirements-checkov.txt should be a full pinned set"
    assert lock == wanted, f"requirements-checkov.lock is {STALE}"


def test_every_locked_requirement_has_its_hashes() -> None:
    for name in ("requirements.lock", "requirements-checkov.lock"):
        unhashed = [n for n, (_, _, hashes) in locked(ROOT / name).items() if hashes == 0]
        assert unhashed == [], f"{name}: no hashes for {unhashed} (`make lock` generates them)"
