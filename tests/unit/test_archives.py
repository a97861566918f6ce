"""ZIP archives as a job's input: what submission accepts (from the central directory alone, by ranged reads), what
it refuses (each hostile archive names its entry), and how a document is read back from its member."""

from __future__ import annotations

import io
import struct
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from longhaul.core import limits
from longhaul.core.contracts import ArchiveInput
from longhaul.core.errors import InvalidInputError
from longhaul.core.problems import InvalidRequest
from longhaul.documents import archives, ocr
from longhaul.documents.intake import Intake, StoredDocument, read_document
from longhaul.documents.parsing import ParsedDocument, ParsedPage
from longhaul.storage.artifacts import ArtifactStore
from longhaul.workflows.invoice_reconciliation import steps as invoice_steps
from longhaul.workflows.invoice_reconciliation.spec import InvoiceReconciliationInput

TENANT = "tenant-a"
UPLOAD_ID = "up_" + "a" * 32
KEY = f"uploads/{TENANT}/{UPLOAD_ID}"
DEFLATED = zipfile.ZIP_DEFLATED


class CountingStore(ArtifactStore):
    """The S3 adapter, counting what it was asked to read: an archive is only ever read by ranges."""

    def __init__(self, s3: Any, bucket: str) -> None:
        super().__init__(s3, bucket)
        self.ranges: list[tuple[str, int, int]] = []
        self.whole: list[str] = []

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self.ranges.append((key, start, end))
        return super().get_range(key, start, end)

    def get_bytes(self, key: str) -> bytes:
        self.whole.append(key)
        return super().get_bytes(key)


@pytest.fixture
def artifacts(s3: Any, bucket: str) -> CountingStore:
    return CountingStore(s3, bucket)


def zip_of(*entries: tuple[str | zipfile.ZipInfo, bytes], compression: int = DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names some tests write on purpose
        with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
            for name, data in entries:
                archive.writestr(name, data)
    return buffer.getvalue()


def upload(store: ArtifactStore, data: bytes) -> None:
    store.put_bytes(KEY, data, "application/zip")


def resolve(store: ArtifactStore, data: bytes) -> tuple[Intake, list[StoredDocument]]:
    upload(store, data)
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=store)
    return intake, intake.archive(ArchiveInput(upload_id=UPLOAD_ID), first_index=0, loc=["archive"])


def problems_of(store: ArtifactStore, data: bytes) -> list[dict[str, Any]]:
    intake, _ = resolve(store, data)
    with pytest.raises(InvalidRequest) as raised:
        intake.check()
    assert raised.value.status == 422
    return raised.value.errors or []


def with_mode(name: str, mode: int) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix: the file type is in the high bits of external_attr
    info.external_attr = mode << 16
    return info


def patch_directory(data: bytes, name: str, offset: int, fmt: str, value: int) -> bytes:
    """Overwrite a field of `name`'s central directory record (offsets as in APPNOTE 4.3.12)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        start = archive.start_dir
    record = start
    while True:
        assert data[record : record + 4] == b"PK\x01\x02"
        name_length, extra_length, comment_length = struct.unpack("<3H", data[record + 28 : record + 34])
        if data[record + 46 : record + 46 + name_length].decode() == name:
            break
        record += 46 + name_length + extra_length + comment_length
    field = record + offset
    return data[:field] + struct.pack(fmt, value) + data[field + struct.calcsize(fmt) :]


# ---------------------------------------------------------------- a good archive


def test_a_good_archive_is_its_documents_in_order_named_by_their_paths(artifacts: CountingStore) -> None:
    # Given an archive with folders, a directory entry and the files macOS adds
    data = zip_of(
        ("contracts/", b""),
        ("contracts/2024/msa.txt", b"The liability cap is 12 months of fees.\n" * 50),
        ("notes.md", b"# Notes\nTermination needs 30 days notice."),
        ("__MACOSX/contracts/._msa.txt", b"\x00\x05\x16\x07"),
        ("contracts/.DS_Store", b"\x00\x00\x00\x01Bud1"),
        ("stored.txt", b"kept as is"),
    )

    # When it is resolved at submission
    intake, documents = resolve(artifacts, data)
    intake.check()

    # Then it is the three documents, in the archive's order, named by their paths, all pointing at the upload
    assert [(d.index, d.name, d.media_type) for d in documents] == [
        (0, "contracts/2024/msa.txt", "text/plain"),
        (1, "notes.md", "text/markdown"),
        (2, "stored.txt", "text/plain"),
    ]
    assert {d.key for d in documents} == {KEY}
    # and only the archive's tail was read (end record and directory, in one ranged GET), never the whole object
    assert artifacts.whole == [] and len(artifacts.ranges) == 1

    # and each document reads back as its own bytes, with two ranged GETs of its member only
    artifacts.ranges.clear()
    assert read_document(artifacts, documents[1]) == b"# Notes\nTermination needs 30 days notice."
    assert read_document(artifacts, documents[0]) == b"The liability cap is 12 months of fees.\n" * 50
    assert len(artifacts.ranges) == 4 and artifacts.whole == []
    member = documents[1].member
    assert member is not None and all(member.offset <= start for _, start, _ in artifacts.ranges[:2])


def test_a_large_archive_reads_its_directory_with_a_second_ranged_get_only(artifacts: CountingStore) -> None:
    # Given an archive whose directory is beyond the tail (members of incompressible bytes)
    filler = bytes(range(256)) * 400
    data = zip_of(*[(f"part-{n:02d}.txt", filler) for n in range(3)], compression=zipfile.ZIP_STORED)

    _, documents = resolve(artifacts, data)

    assert [d.name for d in documents] == ["part-00.txt", "part-01.txt", "part-02.txt"]
    assert len(artifacts.ranges) <= 2 and artifacts.whole == []
    assert all(end - start < 80_000 for _, start, end in artifacts.ranges)


def test_non_ascii_names_are_names_not_overlaps(artifacts: CountingStore) -> None:
    intake, documents = resolve(artifacts, zip_of(("contrats/clé.txt", b"un"), ("contrats/été.md", b"deux")))

    intake.check()
    assert [d.name for d in documents] == ["contrats/clé.txt", "contrats/été.md"]
    assert read_document(artifacts, documents[1]) == b"deux"


def test_documents_indexes_start_where_asked(artifacts: CountingStore) -> None:
    upload(artifacts, zip_of(("a.txt", b"one"), ("b.txt", b"two")))
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=artifacts)

    documents = intake.archive(ArchiveInput(upload_id=UPLOAD_ID), first_index=1, loc=["invoices_archive"])

    assert [d.index for d in documents] == [1, 2]


# ---------------------------------------------------------------- hostile archives


def bomb() -> bytes:
    """8 MiB of zeros, deflated (about 8 KiB), streamed into the archive."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=DEFLATED) as archive, archive.open("zeros.txt", "w") as member:
        for _ in range(8):
            member.write(bytes(1024 * 1024))
    return buffer.getvalue()


def overlapping() -> bytes:
    """Two entries whose directory records point at the same local header and data."""
    data = zip_of(("a.txt", b"first document"), ("b.txt", b"other document"))
    return patch_directory(data, "b.txt", 42, "<L", 0)


def encrypted() -> bytes:
    """A member flagged as encrypted (traditional PKWARE encryption) in its directory record."""
    return patch_directory(zip_of(("secret.txt", b"ciphertext, supposedly")), "secret.txt", 8, "<H", 0x1)


def declared_huge() -> bytes:
    data = zip_of(("big.txt", b"small really"))
    return patch_directory(data, "big.txt", 24, "<L", limits.MAX_UPLOAD_BYTES + 1)


HOSTILE = {
    "traversal": (zip_of(("ok.txt", b"fine"), ("../x.txt", b"escape")), "../x.txt", "`..`"),
    "absolute": (zip_of(("/etc/x.txt", b"root")), "/etc/x.txt", "absolute"),
    "nested-traversal": (zip_of(("a/../../x.txt", b"escape")), "a/../../x.txt", "`..`"),
    "backslash": (zip_of(("a\\b.txt", b"windows")), "a\\b.txt", "separators"),
    "drive": (zip_of(("C:/x.txt", b"drive")), "C:/x.txt", "drive"),
    "control-character": (zip_of(("a\u202eb.txt", b"bidi")), "a\u202eb.txt", "control"),
    "symlink": (zip_of((with_mode("link.txt", 0o120777), b"/etc/passwd")), "link.txt", "symbolic link"),
    "fifo": (zip_of((with_mode("pipe.txt", 0o010644), b"x")), "pipe.txt", "regular file"),
    "bomb": (bomb(), "zeros.txt", "bomb"),
    "declared-huge": (declared_huge(), "big.txt", str(limits.MAX_UPLOAD_BYTES)),
    "overlapping": (overlapping(), "a.txt", "overlap"),
    "encrypted": (encrypted(), "secret.txt", "encrypted"),
    "unsupported-type": (zip_of(("a.txt", b"ok"), ("photo.png", b"\x89PNG")), "photo.png", "unsupported type"),
    "duplicate": (zip_of(("a.txt", b"one"), ("a.txt", b"two")), "a.txt", "duplicate"),
    "empty-member": (zip_of(("empty.txt", b"")), "empty.txt", "empty"),
    "bzip2": (zip_of(("a.txt", b"x" * 100), compression=zipfile.ZIP_BZIP2), "a.txt", "compression method"),
}


@pytest.mark.parametrize(("data", "entry", "reason"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_archive_is_422_naming_the_entry(
    artifacts: CountingStore, data: bytes, entry: str, reason: str
) -> None:
    errors = problems_of(artifacts, data)

    assert any(e["loc"] == ["input", "archive", "entries", entry] and reason in e["msg"] for e in errors), errors
    assert artifacts.whole == []  # refused from the directory, without reading the archive


def test_too_many_documents_is_422_naming_the_archive(artifacts: CountingStore) -> None:
    data = zip_of(*[(f"d{n}.txt", b"x") for n in range(limits.MAX_DOCUMENTS + 1)])

    errors = problems_of(artifacts, data)

    assert errors == [
        {"loc": ["input", "archive"], "msg": f"{limits.MAX_DOCUMENTS + 1} documents, above {limits.MAX_DOCUMENTS}"}
    ]


def test_the_expanded_total_is_bounded(artifacts: CountingStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "MAX_ARCHIVE_EXPANDED_BYTES", 10)

    errors = problems_of(artifacts, zip_of(("a.txt", b"123456"), ("b.txt", b"123456")))

    assert errors == [{"loc": ["input", "archive"], "msg": "expands to 12 bytes, above 10 in all"}]


def test_an_archive_of_only_skipped_entries_holds_no_document(artifacts: CountingStore) -> None:
    errors = problems_of(artifacts, zip_of(("folder/", b""), (".DS_Store", b"x")))

    assert errors == [{"loc": ["input", "archive"], "msg": "the archive holds no document"}]


@pytest.mark.parametrize("data", [b"plain text, not an archive", b"PK\x05\x06" + b"\xff" * 18], ids=["text", "junk"])
def test_not_a_zip_is_422_naming_the_upload(artifacts: CountingStore, data: bytes) -> None:
    assert problems_of(artifacts, data) == [{"loc": ["input", "archive", "upload_id"], "msg": "not a ZIP archive"}]


def test_a_missing_upload_is_422_naming_the_upload(artifacts: CountingStore) -> None:
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=artifacts)

    assert intake.archive(ArchiveInput(upload_id=UPLOAD_ID), first_index=0, loc=["archive"]) == []
    with pytest.raises(InvalidRequest) as raised:
        intake.check()
    assert (raised.value.errors or [])[0]["loc"] == ["input", "archive", "upload_id"]


def test_a_directory_above_its_bound_is_refused_before_it_is_read(
    artifacts: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_ARCHIVE_DIRECTORY_BYTES", 1000)
    monkeypatch.setattr(archives, "_TAIL_BYTES", 64)  # so the directory is not in the tail already fetched
    data = zip_of(*[(f"document-with-a-long-name-{n:03d}.txt", b"x") for n in range(40)])

    errors = problems_of(artifacts, data)

    assert errors[0]["loc"] == ["input", "archive", "upload_id"] and "central directory" in errors[0]["msg"]
    assert all(end - start < 1000 for _, start, end in artifacts.ranges)


def test_problems_are_listed_up_to_a_bound(artifacts: CountingStore) -> None:
    data = zip_of(*[(f"image-{n}.png", b"x") for n in range(archives.MAX_LISTED_PROBLEMS + 5)])

    errors = problems_of(artifacts, data)

    assert len(errors) == archives.MAX_LISTED_PROBLEMS + 1
    assert errors[-1] == {"loc": ["input", "archive"], "msg": "and 5 more problems"}


# ---------------------------------------------------------------- reading a member


def member_document(artifacts: CountingStore, data: bytes) -> StoredDocument:
    upload(artifacts, data)
    entries, problems = archives.inspect(artifacts, KEY, len(data))
    assert problems == []
    [entry] = entries
    return StoredDocument(index=0, name=entry.name, media_type=entry.media_type, key=KEY, member=entry.member)


def test_a_member_that_expands_beyond_its_declared_size_is_invalid_input(artifacts: CountingStore) -> None:
    # Given a member whose declared size (checked at submission) is smaller than what its data inflates to
    document = member_document(artifacts, zip_of(("a.txt", b"x" * 5000)))
    assert document.member is not None
    lying = document.model_copy(update={"member": document.member.model_copy(update={"size": 100})})

    # Then reading it stops one byte past the declared size and says so, for that document
    with pytest.raises(InvalidInputError, match=r"'a\.txt'.*100 bytes"):
        read_document(artifacts, lying)


def test_a_member_whose_checksum_differs_is_invalid_input(artifacts: CountingStore) -> None:
    document = member_document(artifacts, zip_of(("a.txt", b"hello archive")))
    assert document.member is not None
    corrupt = document.model_copy(update={"member": document.member.model_copy(update={"crc": 1})})

    with pytest.raises(InvalidInputError, match="checksum"):
        read_document(artifacts, corrupt)


def test_a_member_without_its_local_header_is_invalid_input(artifacts: CountingStore) -> None:
    document = member_document(artifacts, zip_of(("a.txt", b"hello archive")))
    assert document.member is not None
    moved = document.model_copy(update={"member": document.member.model_copy(update={"offset": 3})})

    with pytest.raises(InvalidInputError, match="local header"):
        read_document(artifacts, moved)


def test_a_plain_document_is_read_whole(artifacts: CountingStore) -> None:
    artifacts.put_bytes("work/job-1/source/000", b"inline", "text/plain")

    data = read_document(
        artifacts, StoredDocument(index=0, name="a.txt", media_type="text/plain", key="work/job-1/source/000")
    )

    assert data == b"inline" and artifacts.whole == ["work/job-1/source/000"] and artifacts.ranges == []


def test_ocr_reads_a_scanned_member_from_its_archive(artifacts: CountingStore) -> None:
    # Given a PDF member of an archive with a page that needs OCR
    document = member_document(artifacts, zip_of(("scans/lease.pdf", b"%PDF-1.4 scanned")))
    parsed = ParsedDocument(
        index=0, name=document.name, media_type="application/pdf", pages=[ParsedPage(number=1, text="", needs_ocr=True)]
    )

    # When its OCR batch is planned, Then the batch says where the member is, and the worker reads just that member
    [batch] = ocr.plan_batches([(parsed, document)])
    [pages] = batch.documents
    assert (pages.key, pages.member) == (KEY, document.member)
    assert read_document(artifacts, pages.source()) == b"%PDF-1.4 scanned"


# ---------------------------------------------------------------- invoices as an archive

INVOICES = Path(__file__).resolve().parents[2] / "samples" / "invoices"
CONTRACT = {"name": "contract_price_list.txt", "text": (INVOICES / "contract_price_list.txt").read_text()}


def invoice_input(**invoices: Any) -> InvoiceReconciliationInput:
    return InvoiceReconciliationInput.model_validate({"contract": CONTRACT, **invoices})


def test_invoices_can_be_one_archive_indexed_after_the_contract(artifacts: CountingStore) -> None:
    # Given an archive of two invoices (text and PDF) in a folder
    names = ("inv_01_northwind.txt", "inv_03_cobalt.pdf")
    upload(artifacts, zip_of(*[(f"2025/{name}", (INVOICES / name).read_bytes()) for name in names]))
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=artifacts)

    # When the invoice workflow prepares a job naming it
    prepared = invoice_steps.prepare(intake, invoice_input(invoices_archive={"upload_id": UPLOAD_ID}))
    intake.check()

    # Then the invoices are the members, indexed after the contract
    payload = invoice_steps.JobInput.model_validate(prepared.payload.model_dump())
    assert payload.contract.index == 0 and payload.contract.member is None
    assert [(d.index, d.name, d.media_type, d.key) for d in payload.invoices] == [
        (1, "2025/inv_01_northwind.txt", "text/plain", KEY),
        (2, "2025/inv_03_cobalt.pdf", "application/pdf", KEY),
    ]
    assert read_document(artifacts, payload.invoices[0]) == (INVOICES / names[0]).read_bytes()


def test_an_invoice_named_like_the_contract_is_422(artifacts: CountingStore) -> None:
    upload(artifacts, zip_of((CONTRACT["name"], b"Invoice 1")))
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=artifacts)

    with pytest.raises(InvalidRequest) as raised:  # before the contract is read
        invoice_steps.prepare(intake, invoice_input(invoices_archive={"upload_id": UPLOAD_ID}))
    assert [e["loc"] for e in raised.value.errors or []] == [["input", "invoices_archive"]]


def test_invoices_archive_counts_against_the_invoice_limit(
    artifacts: CountingStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(invoice_steps, "MAX_INVOICES", 1)
    upload(artifacts, zip_of(("a.txt", b"Invoice 1"), ("b.txt", b"Invoice 2")))
    intake = Intake(job_id="job-1", tenant_id=TENANT, artifacts=artifacts)

    with pytest.raises(InvalidRequest) as raised:  # before the contract is read
        invoice_steps.prepare(intake, invoice_input(invoices_archive={"upload_id": UPLOAD_ID}))
    assert raised.value.errors == [{"loc": ["input", "invoices_archive"], "msg": "2 documents, above 1"}]


@pytest.mark.parametrize(
    "invoices",
    [{}, {"invoices": [{"name": "i.txt", "text": "Invoice"}], "invoices_archive": {"upload_id": UPLOAD_ID}}],
    ids=["neither", "both"],
)
def test_invoices_or_invoices_archive_exactly_one(invoices: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match="exactly one of `invoices` or `invoices_archive`"):
        invoice_input(**invoices)
