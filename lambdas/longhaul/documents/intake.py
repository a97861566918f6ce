"""What a workflow's submission logic gets (`Intake`) and gives back (`PreparedInput`).

A workflow's domain module has `prepare(intake, job_input) -> PreparedInput`: it checks what only it can check
(raising `InvalidRequest` naming the fields), resolves its documents (inline text or uploads) through the intake and
says how long the job should take. Nothing is written until every check has passed: `Intake.store` writes the inline
texts and the job's input artifact only when `prepare` returns.

What a submission costs does not grow with its documents beyond a small constant: the inline texts are written as one
object (`work/<job>/source/inline`, each document a byte span of it, read back with one ranged GET), and the uploads
a request names are looked up concurrently. Inline texts of at most `limits.INLINE_TEXTS_IN_INPUT_MAX_BYTES` in all
travel inside the input document instead (its `inline_texts`; each document's span is `embedded`): a small submission
writes one object, and a step reading such a document reads the input document, about as small.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pydantic import BaseModel, Field

from longhaul.core.contracts import MEDIA_TYPES, ArchiveInput, DocumentInput
from longhaul.core.limits import INLINE_TEXTS_IN_INPUT_MAX_BYTES, MAX_UPLOAD_BYTES
from longhaul.core.model import Model, adapter
from longhaul.core.problems import InvalidRequest
from longhaul.core.records import Job
from longhaul.documents.members import ArchiveMember
from longhaul.storage import artifacts as keys
from longhaul.storage.artifacts import ArtifactStore
from longhaul.storage.jobs import JobStore

MARKDOWN_SUFFIXES = (".md", ".markdown")
LOOKUPS_AT_ONCE = 16  # uploads looked up concurrently at submission (each is one HEAD)
EMBEDDED_TEXTS = "inline_texts"  # the input document's field of the inline texts embedded in it
PREFETCH_SLACK_BYTES = 64 * 1024  # gaps `DocumentReader.prefetch` reads over rather than make another request


class ByteSpan(Model):
    """Where an inline document's bytes are in the object of its job's inline texts, or, `embedded`, in the UTF-8 of
    the `inline_texts` of its job's input document."""

    offset: int = Field(ge=0)
    length: int = Field(ge=0)
    embedded: bool = Field(default=False, exclude_if=lambda embedded: not embedded)


class StoredDocument(Model):
    """A document of a job's input, by reference: `key` is its bytes in the artifacts bucket, or, with `span`, the
    object of the job's inline texts it is a part of, or, with `member`, the archive upload whose member it is (read
    with `read_document`)."""

    index: int
    name: str
    media_type: str
    key: str
    # Left out of the stored input when absent: the input of a job of plain documents reads as it always has.
    member: ArchiveMember | None = Field(default=None, exclude_if=lambda member: member is None)
    span: ByteSpan | None = Field(default=None, exclude_if=lambda span: span is None)


_STORED_DOCUMENTS = adapter(list[StoredDocument])


def read_document(store: ArtifactStore, document: StoredDocument) -> bytes:
    """A stored document's bytes: its object, its span of the job's inline texts (one ranged GET, or, embedded, one
    GET of the input document), or its member of an archive (ranged reads of that member only; a member that expands
    beyond its declared size is `InvalidInputError`). A step reading several documents uses a `DocumentReader`."""
    return DocumentReader(store).read(document)


@dataclass
class DocumentReader:
    """Reads the documents of one step (`read_document`), the input document's embedded texts once for all of them:
    a step that reads several inline documents of a small submission reads its input document once."""

    store: ArtifactStore
    _embedded: dict[str, bytes] = field(default_factory=dict)
    _ranges: dict[str, tuple[int, bytes]] = field(default_factory=dict)  # key -> (offset, bytes) read ahead

    def prefetch(self, documents: Sequence[StoredDocument]) -> None:
        """Read ahead the spans of `documents` in the job's inline texts: one ranged GET per object covering them all
        (a group of consecutive documents is one run of bytes), so `read` of each of them makes no request. A range
        mostly of other documents' bytes (spans far apart) is not read ahead."""
        spans: dict[str, list[ByteSpan]] = {}
        for document in documents:
            span = document.span
            if document.member is None and span is not None and not span.embedded and span.length:
                spans.setdefault(document.key, []).append(span)
        for key, found in spans.items():
            start = min(span.offset for span in found)
            end = max(span.offset + span.length for span in found)
            if len(found) < 2 or end - start > 2 * sum(span.length for span in found) + PREFETCH_SLACK_BYTES:
                continue
            self._ranges[key] = (start, self.store.get_range(key, start, end - 1))

    def read(self, document: StoredDocument) -> bytes:
        if document.member is not None:
            from longhaul.documents import archives

            return archives.read_member(self.store, document.key, document.member)
        span = document.span
        if span is None:
            return self.store.get_bytes(document.key)
        ahead = self._ranges.get(document.key)
        if ahead is not None and ahead[0] <= span.offset and span.offset + span.length <= ahead[0] + len(ahead[1]):
            start = span.offset - ahead[0]
            return ahead[1][start : start + span.length]
        if span.embedded:
            if document.key not in self._embedded:
                self._embedded[document.key] = str(self.store.get_json(document.key)[EMBEDDED_TEXTS]).encode()
            return self._embedded[document.key][span.offset : span.offset + span.length]
        return self.store.get_range(document.key, span.offset, span.offset + span.length - 1) if span.length else b""


@dataclass
class PreparedInput:
    """The workflow's input document (written to `work/<job>/input.json`) and the job's SLA estimate."""

    payload: BaseModel
    estimated_sla_seconds: int
    # What the job's size is counted in (documents, invoices, vendors): the ETA scales its workflow's history by it.
    size: int = 1


@dataclass
class Intake:
    """Document resolution for one submission of one tenant; inline texts are written only by `store`."""

    job_id: str
    tenant_id: str
    artifacts: ArtifactStore
    jobs: JobStore | None = None  # a workflow whose input names an earlier job reads it here
    version: int = 1  # the input's version: a fixed input is stored beside the first, never over it
    parent_job_id: str | None = None  # a child step's job: the job that starts it (whose input may name it)
    _inline: bytearray = field(default_factory=bytearray)  # the inline texts, one after another
    _heads: dict[str, dict[str, Any] | None] = field(default_factory=dict)  # uploads looked up ahead
    _problems: list[dict[str, Any]] = field(default_factory=list)

    @cached_property
    def inline_key(self) -> str:
        return keys.work_key(self.job_id, "source", "inline" if self.version == 1 else f"inline.v{self.version}")

    def document(self, doc: DocumentInput, *, index: int, loc: Sequence[str | int]) -> StoredDocument:
        """Resolve one document; problems are collected (see `check`) so a client hears of all of them at once."""
        return StoredDocument.model_validate(self._resolve(doc, index=index, loc=loc))

    def documents(self, docs: Sequence[DocumentInput], *, loc: Sequence[str | int]) -> list[StoredDocument]:
        """Resolve a list of documents (the uploads looked up concurrently), as `document` does each."""
        self.look_up(docs)
        # One validation of the whole list: at thousands of documents, a model built per document in Python is
        # most of a submission's time.
        return _STORED_DOCUMENTS.validate_python([self._resolve(d, index=i, loc=[*loc, i]) for i, d in enumerate(docs)])

    def _resolve(self, doc: DocumentInput, *, index: int, loc: Sequence[str | int]) -> dict[str, Any]:
        """The fields of the stored document `doc` becomes (its inline text kept for `store`)."""
        if doc.text is not None:
            media_type: str = doc.media_type or (
                "text/markdown" if doc.name.endswith(MARKDOWN_SUFFIXES) else "text/plain"
            )
            if media_type == "application/pdf":
                self.problem([*loc, "media_type"], "inline text cannot be a PDF; upload it")
            data = doc.text.encode()
            span = {"offset": len(self._inline), "length": len(data)}
            self._inline += data
            return {"index": index, "name": doc.name, "media_type": media_type, "key": self.inline_key, "span": span}
        assert doc.upload_id is not None  # the contract allows exactly one of text and upload_id
        key = keys.upload_key(self.tenant_id, doc.upload_id)
        head = self._heads[key] if key in self._heads else self.artifacts.head(key)
        if head is None:
            self.problem([*loc, "upload_id"], "no such upload (or not uploaded yet)")
            return {"index": index, "name": doc.name, "media_type": "application/octet-stream", "key": key}
        if int(head.get("ContentLength", 0)) > MAX_UPLOAD_BYTES:
            self.problem(list(loc), f"upload exceeds {MAX_UPLOAD_BYTES} bytes")
        media_type = doc.media_type or str(head.get("ContentType", "application/octet-stream")).split(";")[0]
        if media_type not in MEDIA_TYPES:
            self.problem(
                [*loc, "media_type"], f"unsupported media type {media_type!r}; allowed: {', '.join(MEDIA_TYPES)}"
            )
        return {"index": index, "name": doc.name, "media_type": media_type, "key": key}

    def look_up(self, docs: Sequence[DocumentInput]) -> None:
        """Look up the uploads `docs` name, concurrently (`document` then answers from what was found)."""
        wanted = sorted({keys.upload_key(self.tenant_id, d.upload_id) for d in docs if d.upload_id is not None})
        wanted = [key for key in wanted if key not in self._heads]
        if len(wanted) < 2:
            return
        self._heads.update(zip(wanted, self.artifacts.head_many(wanted, at_once=LOOKUPS_AT_ONCE), strict=True))

    def archive(
        self,
        archive: ArchiveInput,
        *,
        first_index: int,
        loc: Sequence[str | int],
        max_documents: int | None = None,
    ) -> list[StoredDocument]:
        """The documents of an uploaded ZIP archive, in its directory's order, indexed from `first_index`; every
        problem of the archive names `loc` and the entry (only its central directory is read)."""
        key = keys.upload_key(self.tenant_id, archive.upload_id)
        size = self.artifacts.size(key)
        if size is None:
            self.problem([*loc, "upload_id"], "no such upload (or not uploaded yet)")
            return []
        from longhaul.documents import archives

        entries, problems = archives.inspect(self.artifacts, key, size, max_documents=max_documents)
        for problem in problems[: archives.MAX_LISTED_PROBLEMS]:
            if problem.entry is None:
                self.problem([*loc, "upload_id"] if problem.upload else list(loc), problem.message)
            else:
                self.problem([*loc, "entries", problem.entry], f"{problem.entry!r}: {problem.message}")
        if len(problems) > archives.MAX_LISTED_PROBLEMS:
            self.problem(list(loc), f"and {len(problems) - archives.MAX_LISTED_PROBLEMS} more problems")
        return [
            StoredDocument(
                index=first_index + i, name=entry.name, media_type=entry.media_type, key=key, member=entry.member
            )
            for i, entry in enumerate(entries)
        ]

    def read(self, document: StoredDocument) -> bytes:
        """The bytes of a resolved document (inline text not yet written, an upload, or an archive's member)."""
        if document.span is not None and document.key == self.inline_key:
            return bytes(self._inline[document.span.offset : document.span.offset + document.span.length])
        return read_document(self.artifacts, document)

    def tenant_job(self, job_id: str) -> Job | None:
        """One of this tenant's jobs (another tenant's is None, as if it did not exist)."""
        if self.jobs is None:
            return None
        return self.jobs.get_job(job_id, tenant_id=self.tenant_id)

    def problem(self, loc: Sequence[str | int], message: str) -> None:
        self._problems.append({"loc": ["input", *loc], "msg": message})

    def check(self) -> None:
        """Raise the problems found so far as one 422 naming every field."""
        if self._problems:
            raise InvalidRequest("some of the input cannot be used", errors=list(self._problems))

    def store(self, prepared: PreparedInput) -> str:
        """Write the input document, with the inline texts in it when they are small (else the texts first, as one
        object of their own); the input key."""
        self.check()
        input_key = keys.input_key(self.job_id, self.version)
        if not self._inline:
            return self.artifacts.put_json(input_key, prepared.payload)
        if len(self._inline) > INLINE_TEXTS_IN_INPUT_MAX_BYTES:
            self.artifacts.put_bytes(self.inline_key, bytes(self._inline), "application/octet-stream")
            return self.artifacts.put_json(input_key, prepared.payload)
        payload = _embedded(prepared.payload.model_dump(mode="json"), self.inline_key, input_key)
        return self.artifacts.put_json(input_key, {**payload, EMBEDDED_TEXTS: self._inline.decode()})


def submitted_documents(store: ArtifactStore, documents: Sequence[StoredDocument]) -> list[dict[str, Any]]:
    """Stored documents as a request gives them (`DocumentInput`): an inline one with its text read back, an upload by
    its id; the members of an archive are not listed here (see `archive_upload_id`)."""
    reader = DocumentReader(store)
    plain = [d for d in documents if d.member is None]
    reader.prefetch([d for d in plain if d.span is not None])
    found: list[dict[str, Any]] = []
    for d in plain:
        if d.span is not None:
            found.append({"name": d.name, "text": reader.read(d).decode(), "media_type": d.media_type})
        else:
            found.append({"name": d.name, "upload_id": d.key.rsplit("/", 1)[-1], "media_type": d.media_type})
    return found


def archive_upload_id(documents: Sequence[StoredDocument]) -> str | None:
    """The upload id of the archive the documents came from, if they came from one."""
    return next((d.key.rsplit("/", 1)[-1] for d in documents if d.member is not None), None)


def _embedded(node: Any, inline_key: str, input_key: str) -> Any:
    """The input document's JSON with every document of the inline texts' object pointing into its own
    `inline_texts` instead (the same spans: the texts are the same bytes)."""
    if isinstance(node, list):
        return [_embedded(item, inline_key, input_key) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("key") == inline_key and isinstance(node.get("span"), dict):
        return {**node, "key": input_key, "span": {**node["span"], "embedded": True}}
    return {name: _embedded(value, inline_key, input_key) for name, value in node.items()}
