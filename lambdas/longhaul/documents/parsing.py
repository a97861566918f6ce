"""Parsing documents into pages and chunking pages into citable passages (pure functions).

Every chunk's text is a verbatim slice of its page's text and never spans pages, so a quote verified against a
chunk also appears verbatim on the cited page.
"""

import re
from collections.abc import Iterable
from io import BytesIO
from pathlib import PurePath
from typing import Literal

from longhaul.core.contracts import MEDIA_TYPES
from longhaul.core.errors import InvalidInputError
from longhaul.core.model import Model

Span = tuple[int, int]

_EXTENSIONS = {
    ".pdf": "application/pdf",
    ".txt": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
}
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE_END = re.compile(r"[.!?][\"')\]]*\s+")
_NO_BREAK_WORDS = frozenset(
    {"e.g", "i.e", "etc", "no", "inc", "ltd", "co", "vs", "art", "sec", "cl", "para", "sch", "p", "pp"}
)
_ENUMERATOR = re.compile(r"\(?[0-9ivxIVX]+(\.[0-9]+)*\)?")


class ParsedPage(Model):
    number: int
    text: str
    needs_ocr: bool = False  # no text layer, and not (yet) read by OCR
    source: Literal["text", "ocr"] = "text"
    ocr_confidence: float | None = None
    ocr_unreadable: bool = False  # OCR tried this page and found no usable text


class ParsedDocument(Model):
    index: int
    name: str
    media_type: str
    pages: list[ParsedPage]

    @property
    def pages_needing_ocr(self) -> list[int]:
        """1-based numbers of the pages without a text layer that OCR has not tried (a page it tried and could not
        read is in `pages_unreadable` instead: each page is in one list only)."""
        return [page.number for page in self.pages if page.needs_ocr and not page.ocr_unreadable]

    @property
    def pages_ocr(self) -> list[int]:
        """1-based numbers of the pages whose text OCR read."""
        return [page.number for page in self.pages if page.source == "ocr"]

    @property
    def pages_unreadable(self) -> list[int]:
        """1-based numbers of the pages OCR could not read."""
        return [page.number for page in self.pages if page.ocr_unreadable]


class Chunk(Model):
    chunk_id: str
    document: str
    document_index: int
    page: int
    text: str
    source: Literal["text", "ocr"] = "text"
    ocr_confidence: float | None = None


# ---------------------------------------------------------------- parsing


def media_type_for(name: str, declared: str | None) -> str:
    """The declared media type if allowed, else the one implied by the file extension."""
    if declared is not None:
        if declared not in MEDIA_TYPES:
            raise InvalidInputError(f"document '{name}': media type '{declared}' is not one of {MEDIA_TYPES}")
        return declared
    media_type = _EXTENSIONS.get(PurePath(name).suffix.lower())
    if media_type is None:
        allowed = ", ".join(sorted(_EXTENSIONS))
        raise InvalidInputError(
            f"document '{name}': cannot tell its media type; use one of the extensions {allowed} "
            f"or declare one of {MEDIA_TYPES}"
        )
    return media_type


def parse_document(*, index: int, name: str, data: bytes, media_type: str) -> ParsedDocument:
    """Split a PDF, plain-text or Markdown document into pages of text."""
    if not data:
        raise InvalidInputError(f"document '{name}' is empty")
    if media_type == "application/pdf":
        pages = _pdf_pages(name, data)
    elif media_type in ("text/plain", "text/markdown"):
        pages = _text_pages(name, data)
    else:
        raise InvalidInputError(f"document '{name}': media type '{media_type}' is not one of {MEDIA_TYPES}")
    return ParsedDocument(index=index, name=name, media_type=media_type, pages=pages)


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decode(name: str, data: bytes) -> str:
    """UTF-8 (with or without BOM); failing that, Windows-1252, the usual legacy encoding of text files."""
    if b"\x00" in data:
        raise InvalidInputError(f"document '{name}' looks binary, not text; upload it as application/pdf if it is one")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        try:
            return data.decode("cp1252")
        except UnicodeDecodeError:
            raise InvalidInputError(
                f"document '{name}' is neither UTF-8 nor Windows-1252 text (byte {error.start})"
            ) from error


def _text_pages(name: str, data: bytes) -> list[ParsedPage]:
    text = _decode(name, data)
    parts = _normalise_newlines(text).split("\f")
    return [ParsedPage(number=i, text=part, needs_ocr=False) for i, part in enumerate(parts, start=1)]


def _pdf_pages(name: str, data: bytes) -> list[ParsedPage]:
    from pypdf import PasswordType, PdfReader  # only the parse step reads PDFs: kept out of other cold starts

    # pypdf raises many exception types on malformed input; all of them mean "cannot read this document".
    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise InvalidInputError(f"document '{name}' is an encrypted PDF; upload it without a password")
        texts = [page.extract_text() or "" for page in reader.pages]
    except InvalidInputError:
        raise
    except Exception as error:
        raise InvalidInputError(f"document '{name}' is not a readable PDF: {error}") from error
    return [_pdf_page(number, text) for number, text in enumerate(texts, start=1)]


def _pdf_page(number: int, text: str) -> ParsedPage:
    text = _normalise_newlines(text)
    if not text.strip():
        return ParsedPage(number=number, text="", needs_ocr=True)
    return ParsedPage(number=number, text=text, needs_ocr=False)


# ---------------------------------------------------------------- spans


def _strip_span(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def _split_spans(text: str, start: int, end: int, breaks: Iterable[re.Match[str]]) -> list[Span]:
    """The stripped, non-empty pieces between `breaks`; a break keeps its non-space prefix (punctuation)."""
    spans: list[Span] = []
    for match in breaks:
        span = _strip_span(text, start, match.start() + len(match.group().rstrip()))
        if span:
            spans.append(span)
        start = match.end()
    span = _strip_span(text, start, end)
    return [*spans, span] if span else spans


def paragraph_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Non-blank paragraphs (separated by blank lines) of `text[start:end]` as (start, end) offsets."""
    end = len(text) if end is None else end
    return _split_spans(text, start, end, _PARAGRAPH_BREAK.finditer(text, start, end))


def _is_sentence_end(text: str, match: re.Match[str]) -> bool:
    following = text[match.end() : match.end() + 1]
    if following and following.islower():
        return False
    words = text[max(0, match.start() - 12) : match.start()].split()
    word = words[-1].lower().lstrip("(") if words else ""
    return word not in _NO_BREAK_WORDS and not _ENUMERATOR.fullmatch(word)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentences of `text[start:end]` as (start, end) offsets; paragraph breaks also end a sentence."""
    end = len(text) if end is None else end
    spans: list[Span] = []
    for p_start, p_end in paragraph_spans(text, start, end):
        breaks = (m for m in _SENTENCE_END.finditer(text, p_start, p_end) if _is_sentence_end(text, m))
        spans.extend(_split_spans(text, p_start, p_end, breaks))
    return spans


def _hard_spans(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    spans: list[Span] = []
    while end - start > max_chars:
        cut = text.rfind(" ", start + max_chars // 2, start + max_chars)
        cut = cut if cut > start else start + max_chars
        span = _strip_span(text, start, cut)
        if span:
            spans.append(span)
        start = cut
    span = _strip_span(text, start, end)
    return [*spans, span] if span else spans


# ---------------------------------------------------------------- chunking


def _units(text: str, max_chars: int) -> list[Span]:
    """Paragraphs, or the sentences of a too-long paragraph, or hard pieces of a too-long sentence."""
    units: list[Span] = []
    for p_start, p_end in paragraph_spans(text):
        if p_end - p_start <= max_chars:
            units.append((p_start, p_end))
            continue
        for s_start, s_end in sentence_spans(text, p_start, p_end):
            units.extend(_hard_spans(text, s_start, s_end, max_chars))
    return units


def _pack(units: list[Span], max_chars: int) -> list[Span]:
    """Greedily merge consecutive units into spans of at most `max_chars` characters."""
    packed: list[Span] = []
    for start, end in units:
        if packed and end - packed[-1][0] <= max_chars:
            packed[-1] = (packed[-1][0], end)
        else:
            packed.append((start, end))
    return packed


def chunk_document(doc: ParsedDocument, *, max_chars: int = 1200) -> list[Chunk]:
    """Chunks of at most `max_chars` characters, each a verbatim slice of one page's text."""
    if max_chars < 20:
        raise ValueError("max_chars must be at least 20")
    chunks: list[Chunk] = []
    for page in doc.pages:
        if page.needs_ocr:
            continue
        for n, (start, end) in enumerate(_pack(_units(page.text, max_chars), max_chars), start=1):
            chunks.append(
                Chunk(
                    chunk_id=f"d{doc.index}-p{page.number}-c{n}",
                    document=doc.name,
                    document_index=doc.index,
                    page=page.number,
                    text=page.text[start:end],
                    source=page.source,
                    ocr_confidence=page.ocr_confidence,
                )
            )
    return chunks
