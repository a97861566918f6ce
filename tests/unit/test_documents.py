"""Parsing documents into pages and chunking pages into verbatim, page-bound passages."""

from __future__ import annotations

from io import BytesIO
from pathlib import Path

import pytest
from pypdf import PdfReader, PdfWriter

from longhaul.core.errors import InvalidInputError
from longhaul.documents.parsing import (
    ParsedDocument,
    ParsedPage,
    chunk_document,
    media_type_for,
    parse_document,
    sentence_spans,
)

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "documents"


def _text_doc(text: str, *, index: int = 0, name: str = "notes.txt") -> ParsedDocument:
    return parse_document(index=index, name=name, data=text.encode(), media_type="text/plain")


def _words(text: str) -> str:
    return "".join(text.split())


# ---------------------------------------------------------------- media types


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("contract.pdf", "application/pdf"),
        ("CONTRACT.PDF", "application/pdf"),
        ("letter.txt", "text/plain"),
        ("addendum.md", "text/markdown"),
        ("addendum.markdown", "text/markdown"),
    ],
)
def test_media_type_comes_from_the_extension_when_not_declared(name: str, expected: str) -> None:
    assert media_type_for(name, None) == expected


def test_a_declared_media_type_wins_over_the_extension() -> None:
    assert media_type_for("export.pdf", "text/plain") == "text/plain"


def test_an_unknown_extension_is_invalid_input_listing_what_is_allowed() -> None:
    with pytest.raises(InvalidInputError, match=r"contract\.docx.*\.pdf"):
        media_type_for("contract.docx", None)


def test_an_unsupported_declared_media_type_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="image/png"):
        media_type_for("scan.png", "image/png")


# ---------------------------------------------------------------- text


def test_text_is_decoded_without_bom_and_with_normalised_line_endings() -> None:
    # Given a UTF-8 file with a BOM, Windows and old-Mac line endings
    data = "\ufeffFirst line\r\nSecond line\rThird \u2013 line".encode()

    # When it is parsed
    doc = parse_document(index=2, name="a.txt", data=data, media_type="text/plain")

    # Then there is one page with clean text
    assert doc.pages == [ParsedPage(number=1, text="First line\nSecond line\nThird \u2013 line", needs_ocr=False)]
    assert (doc.index, doc.name, doc.media_type) == (2, "a.txt", "text/plain")


def test_a_form_feed_starts_a_new_page() -> None:
    doc = _text_doc("Page one.\fPage two.\fPage three.")

    assert [(p.number, p.text) for p in doc.pages] == [(1, "Page one."), (2, "Page two."), (3, "Page three.")]
    assert doc.pages_needing_ocr == []


def test_legacy_windows_1252_text_is_decoded() -> None:
    doc = parse_document(
        index=0, name="latin.txt", data="Haftung für Schäden – 5 €".encode("cp1252"), media_type="text/plain"
    )
    assert doc.pages[0].text == "Haftung für Schäden – 5 €"


@pytest.mark.parametrize("data", [b"\x00\x01binary", b"caf\x81\x8d"], ids=["binary", "undecodable"])
def test_undecodable_text_is_invalid_input_naming_the_document(data: bytes) -> None:
    with pytest.raises(InvalidInputError, match=r"latin\.txt"):
        parse_document(index=0, name="latin.txt", data=data, media_type="text/plain")


def test_an_empty_document_is_invalid_input() -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        parse_document(index=0, name="blank.md", data=b"", media_type="text/markdown")


# ---------------------------------------------------------------- PDF


def test_a_multi_page_pdf_keeps_its_page_numbers() -> None:
    data = (SAMPLES / "master_services_agreement.pdf").read_bytes()

    doc = parse_document(index=0, name="msa.pdf", data=data, media_type="application/pdf")

    assert [p.number for p in doc.pages] == [1, 2, 3]
    assert "Limitation of liability" in doc.pages[1].text
    assert "\r" not in "".join(p.text for p in doc.pages)
    assert doc.pages_needing_ocr == []


def test_a_pdf_page_without_a_text_layer_needs_ocr() -> None:
    data = (SAMPLES / "schedule_3_service_levels_signed.pdf").read_bytes()

    doc = parse_document(index=0, name="schedule.pdf", data=data, media_type="application/pdf")

    assert doc.pages_needing_ocr == [2]
    assert doc.pages[1] == ParsedPage(number=2, text="", needs_ocr=True)
    assert "Service credits" in doc.pages[0].text


def test_a_corrupt_pdf_is_invalid_input_naming_the_document() -> None:
    with pytest.raises(InvalidInputError, match=r"broken\.pdf"):
        parse_document(index=0, name="broken.pdf", data=b"%PDF-1.7\nnot really", media_type="application/pdf")


def test_a_password_protected_pdf_is_invalid_input() -> None:
    # Given a PDF that needs a user password to open
    writer = PdfWriter(clone_from=PdfReader(SAMPLES / "master_services_agreement.pdf"))
    writer.encrypt(user_password="secret", algorithm="RC4-128")
    buffer = BytesIO()
    writer.write(buffer)

    # Then parsing it fails as invalid input, naming the document
    with pytest.raises(InvalidInputError, match=r"locked\.pdf.*encrypted"):
        parse_document(index=0, name="locked.pdf", data=buffer.getvalue(), media_type="application/pdf")


# ---------------------------------------------------------------- chunking

LONG_PAGE = "\n\n".join(
    [
        "1. Scope",
        " ".join(f"Sentence number {i} explains one obligation of the Supplier." for i in range(40)),
        "A" * 700,
        "Short closing paragraph.",
    ]
)


def test_chunks_are_verbatim_slices_of_one_page_within_the_size_limit() -> None:
    doc = _text_doc(f"{LONG_PAGE}\f{LONG_PAGE}")

    chunks = chunk_document(doc, max_chars=300)

    for chunk in chunks:
        assert chunk.text in doc.pages[chunk.page - 1].text
        assert 0 < len(chunk.text) <= 300
        assert chunk.text == chunk.text.strip()
    assert {c.page for c in chunks} == {1, 2}


def test_chunking_loses_no_text() -> None:
    doc = _text_doc(LONG_PAGE)

    chunks = chunk_document(doc, max_chars=250)

    assert _words("".join(c.text for c in chunks)) == _words(doc.pages[0].text)


def test_small_paragraphs_are_packed_together_and_long_ones_split_at_sentences() -> None:
    doc = _text_doc("Alpha one.\n\nBeta two.\n\nGamma three is a much longer sentence. And another one here.")

    chunks = chunk_document(doc, max_chars=40)

    assert [c.text for c in chunks] == [
        "Alpha one.\n\nBeta two.",
        "Gamma three is a much longer sentence.",
        "And another one here.",
    ]


def test_chunk_ids_are_deterministic_and_skip_pages_needing_ocr() -> None:
    doc = ParsedDocument(
        index=3,
        name="scan.pdf",
        media_type="application/pdf",
        pages=[
            ParsedPage(number=1, text="First page text.", needs_ocr=False),
            ParsedPage(number=2, text="", needs_ocr=True),
            ParsedPage(number=3, text="Third page.\n\n" + "Word " * 60, needs_ocr=False),
        ],
    )

    chunks = chunk_document(doc, max_chars=200)

    assert [c.chunk_id for c in chunks] == ["d3-p1-c1", "d3-p3-c1", "d3-p3-c2", "d3-p3-c3"]
    assert all(c.document == "scan.pdf" and c.document_index == 3 for c in chunks)
    assert chunk_document(doc, max_chars=200) == chunks


def test_blank_pages_yield_no_chunks() -> None:
    assert chunk_document(_text_doc("\n\n   \f\n")) == []


def test_a_tiny_chunk_size_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk_document(_text_doc("text"), max_chars=5)


def test_sentences_do_not_break_at_abbreviations_or_clause_numbers() -> None:
    text = "8.2 Fees (e.g. hosting) are due. See cl. 4 for details! Is that clear? Yes."

    sentences = [text[start:end] for start, end in sentence_spans(text)]

    assert sentences == [
        "8.2 Fees (e.g. hosting) are due.",
        "See cl. 4 for details!",
        "Is that clear?",
        "Yes.",
    ]
