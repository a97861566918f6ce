"""Paste the figures the docs quote from the commands that measure them.

    make figures                                   # every region of README.md and the pages under docs/
    .venv/bin/python bench/figures.py ocr archive  # only the regions whose command mentions these words
    .venv/bin/python bench/figures.py --list       # the regions and their commands

A figure a document quotes sits in a region that names the command printing it:

    <!-- figures: .venv/bin/python bench/ocr.py --markdown -->
    `.venv/bin/python bench/ocr.py` prints pages per second (… measured on 2 cores (…), load average 0.4, …).
    <!-- /figures -->

Pasting runs the command from the repository's root and puts what it printed between the markers. Each such
command says the machine and its load in what it prints; `tests/unit/test_docs_runner.py` checks that every region
names a bench command that has `--markdown` and reads "measured on". Figures that depend only on the code (a sample
job's state transitions, its calls) are shown in a command's expected output instead, and the docs suite checks
them on every run.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REGION = re.compile(r"(<!-- figures: (?P<command>.+?) -->\n)(?P<body>.*?)(\n?<!-- /figures -->)", re.DOTALL)


@dataclass(frozen=True)
class Region:
    path: Path
    line: int
    command: str
    body: str


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def regions(path: Path) -> list[Region]:
    text = path.read_text()
    return [
        Region(path, text.count("\n", 0, found.start()) + 1, found.group("command"), found.group("body"))
        for found in REGION.finditer(text)
    ]


def paste(path: Path, wanted: list[str]) -> int:
    """Run the commands of the regions of `path` that mention every word of `wanted`; paste what they print."""
    text = path.read_text()
    pasted = 0

    def replace(found: re.Match[str]) -> str:
        nonlocal pasted
        command = found.group("command")
        if not all(word in command for word in wanted):
            return found.group(0)
        print(f"{path.name}: {command}", file=sys.stderr, flush=True)
        ran = subprocess.run(shlex.split(command), cwd=ROOT, capture_output=True, text=True, check=False)
        if ran.returncode != 0:
            raise SystemExit(f"{command} failed ({ran.returncode}):\n{ran.stderr[-3000:]}")
        pasted += 1
        return f"{found.group(1)}{ran.stdout.strip()}\n<!-- /figures -->"

    updated = REGION.sub(replace, text)
    if updated != text:
        path.write_text(updated)
    return pasted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("words", nargs="*", help="only the regions whose command mentions all of these")
    parser.add_argument("--list", action="store_true", help="list the regions and their commands")
    args = parser.parse_args()
    if args.list:
        for path in documents():
            for region in regions(path):
                print(f"{path.relative_to(ROOT)}:{region.line}: {region.command}")
        return
    pasted = sum(paste(path, args.words) for path in documents())
    print(f"pasted {pasted} region(s)", file=sys.stderr)


if __name__ == "__main__":
    main()
