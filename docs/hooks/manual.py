"""The manual's MkDocs hook: the reference pages are generated from the code at build time (`manual_reference`), and
a page's `<!-- generated: NAME -->` marker is replaced by what the code says (the job status machine's diagram).

A marker the hook does not know, or a page that lost the marker the hook must fill, fails the build (`strict`)."""

from __future__ import annotations

import logging
import re
from typing import Any

import manual_reference
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

LOG = logging.getLogger("mkdocs.plugins.longhaul")
MARKER = re.compile(r"<!--\s*generated:\s*([a-z0-9-]+)\s*-->")
GENERATED_BLOCKS = {"job-status-diagram": manual_reference.job_status_diagram}
# Where each generated block must appear (a page rewritten without its marker would silently drop it).
REQUIRED_MARKERS = {"concepts/jobs.md": "job-status-diagram"}


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    for path, content in manual_reference.pages().items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            LOG.warning("%s is generated: the file in docs/ is ignored (remove it)", path)
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    path = page.file.src_uri
    required = REQUIRED_MARKERS.get(path)
    if required and f"generated: {required}" not in markdown:
        LOG.warning("%s: the marker <!-- generated: %s --> is missing", path, required)

    def replace(found: re.Match[str]) -> str:
        name = found.group(1)
        if name not in GENERATED_BLOCKS:
            LOG.warning("%s: unknown marker <!-- generated: %s -->", path, name)
            return found.group(0)
        return GENERATED_BLOCKS[name]()

    return MARKER.sub(replace, markdown)
