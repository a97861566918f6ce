"""ZIP archives of documents: checked at submission from the central directory alone, read member by member.

`inspect` runs in the API function, so it stays light: the stdlib `zipfile` reads the archive through
`RangedObject`, a seekable file over S3 ranged GETs, and `zipfile.ZipFile` only reads the end record and the central
directory (two GETs at most; one for a small archive) — never a member's data. It refuses what could hurt the
platform or mislead a reader (each reason names the entry): path traversal, absolute or drive paths, backslashes,
control and bidi characters, over-long names, duplicates, links and other special files, encryption, compression
other than stored/deflate, unsupported extensions, empty members, members above the upload size, a total expanded
size above the archive bound, a bomb's compression ratio, and members whose data overlap (the "overlapping files"
bomb points many entries at one compressed stream). Folders are fine: `contracts/2024/a.pdf` is the document's
name. Directories, `__MACOSX/` (macOS resource forks) and `.DS_Store` files are skipped.

`read_member` reads one member with two ranged GETs (its local header, then its data) and inflates it without ever
producing more than its declared size: a header that lies about the size is `InvalidInputError` for that document,
never a Lambda function out of memory.
"""

import io
import stat
import struct
import zipfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from longhaul.core import limits
from longhaul.core.contracts import check_plain_name
from longhaul.core.errors import InvalidInputError
from longhaul.documents.members import ArchiveMember
from longhaul.storage.artifacts import ArtifactStore

# The media type of a member, by its extension (as for uploads: PDF, plain text, Markdown).
EXTENSIONS = {".pdf": "application/pdf", ".txt": "text/plain", ".md": "text/markdown", ".markdown": "text/markdown"}
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED
_ENCRYPTED = 0x1 | 0x40  # traditional PKWARE encryption, strong encryption
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader: 30 bytes
_LOCAL_SIGNATURE = b"PK\x03\x04"
# zipfile reads the end record, an optional comment (up to 64 KiB) and the Zip64 locator at the end of the archive:
# one GET of the tail serves all of them (and the central directory too, for a small archive).
_TAIL_BYTES = (1 << 16) + 22 + 20 + 56
# At most this many problems are listed (a hostile archive can have thousands of bad entries).
MAX_LISTED_PROBLEMS = 20


@dataclass(frozen=True)
class ArchiveEntry:
    """A member accepted as a document: its name (the path inside the archive), media type and location."""

    name: str
    media_type: str
    member: ArchiveMember


@dataclass(frozen=True)
class ArchiveProblem:
    """Why the archive (entry None) or one of its entries cannot be used; `upload` when the upload itself is not
    a usable archive (not a ZIP, too large)."""

    entry: str | None
    message: str
    upload: bool = False


class NotAnArchive(Exception):
    """The object is not a ZIP archive this module can read."""


class DirectoryTooLarge(Exception):
    """The central directory is larger than `MAX_ARCHIVE_DIRECTORY_BYTES`."""


class RangedObject(io.RawIOBase):
    """A read-only, seekable file over one object of the artifact store: each read is a ranged GET (the tail of
    the object is fetched once and kept), and no single read may exceed `max_read` bytes."""

    def __init__(self, store: ArtifactStore, key: str, size: int, *, max_read: int) -> None:
        super().__init__()
        self.store, self.key, self.length, self.max_read = store, key, size, max_read
        self.position = 0
        self.gets = 0
        self._tail_start = max(0, size - _TAIL_BYTES)
        self._tail: bytes | None = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.length}[whence]
        if base + offset < 0:
            raise OSError("seek before the start of the object")
        self.position = base + offset
        return self.position

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        data = self._read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return self._read(self.length - self.position)

    def read(self, size: int | None = -1) -> bytes:
        return self.readall() if size is None or size < 0 else self._read(size)

    def _read(self, size: int) -> bytes:
        start, end = self.position, min(self.position + size, self.length)
        if end <= start:
            return b""
        if end - start > self.max_read:
            raise DirectoryTooLarge(f"a read of {end - start} bytes")
        if start >= self._tail_start:
            if self._tail is None:
                self._tail = self._get(self._tail_start, self.length)
            data = self._tail[start - self._tail_start : end - self._tail_start]
        else:
            data = self._get(start, end)
        self.position += len(data)
        return data

    def _get(self, start: int, end: int) -> bytes:
        self.gets += 1
        return self.store.get_range(self.key, start, end - 1)


def media_type_of(name: str) -> str | None:
    return EXTENSIONS.get(PurePosixPath(name).suffix.lower())


def skipped(info: zipfile.ZipInfo) -> bool:
    """Directories, macOS resource forks and Finder files: not documents, and not worth a 422."""
    name = info.orig_filename
    return (
        name.endswith("/")
        or name.startswith("__MACOSX/")
        or name.rsplit("/", 1)[-1] == ".DS_Store"
        or stat.S_ISDIR(_unix_mode(info))
    )


def _unix_mode(info: zipfile.ZipInfo) -> int:
    return (info.external_attr >> 16) & 0xFFFF if info.create_system == 3 else 0


def name_problem(name: str) -> str | None:
    """Why a member's name cannot be a document's name: each folder and the file name is checked like a document
    name (so no `..`, no backslash, no drive, no control or bidi characters), and the path is relative."""
    if len(name) > limits.MAX_ARCHIVE_NAME_CHARS:
        return f"names are limited to {limits.MAX_ARCHIVE_NAME_CHARS} characters"
    if name.startswith("/"):
        return "an absolute path"
    for part in name.split("/"):
        if not part:
            return "an empty path segment"
        try:
            check_plain_name(part)
        except ValueError as error:
            return f"the path segment {part!r} {error}"
    return None


def entry_problem(info: zipfile.ZipInfo) -> str | None:
    """Why one (not skipped) member cannot be a document, from its central directory record."""
    mode = _unix_mode(info)
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_IFMT(mode) not in (0, stat.S_IFREG):  # 0: the archiver stored permissions only
        return "not a regular file"
    if info.flag_bits & _ENCRYPTED:
        return "encrypted"
    if info.compress_type not in (STORED, DEFLATED):
        return f"compression method {info.compress_type} (only stored and deflate are read)"
    reason = name_problem(info.orig_filename)
    if reason:
        return reason
    if media_type_of(info.orig_filename) is None:
        return f"unsupported type; the extensions read are {', '.join(EXTENSIONS)}"
    if info.file_size == 0:
        return "empty"
    if info.file_size > limits.MAX_UPLOAD_BYTES:
        return f"expands to {info.file_size} bytes, above the {limits.MAX_UPLOAD_BYTES} bytes of a document"
    if info.compress_type == STORED and info.compress_size != info.file_size:
        return "a stored member whose sizes differ"
    if info.file_size > limits.ARCHIVE_RATIO_FLOOR_BYTES and info.file_size > limits.MAX_ARCHIVE_RATIO * max(
        info.compress_size, 1
    ):
        return f"expands more than {limits.MAX_ARCHIVE_RATIO} times (a compression bomb)"
    return None


def _name_bytes(info: zipfile.ZipInfo) -> int:
    """The length of the name as stored (UTF-8 when flagged, else the historical cp437 that zipfile decoded)."""
    return len(info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437", errors="replace"))


def _overlaps(members: Sequence[zipfile.ZipInfo], directory_start: int) -> list[ArchiveProblem]:
    """Members whose local header and data (at least 30 bytes + name + compressed size: the local extra field can
    only make it longer) run into the next member or the central directory."""
    problems = []
    ordered = sorted(members, key=lambda i: i.header_offset)
    for position, info in enumerate(ordered):
        following = ordered[position + 1] if position + 1 < len(ordered) else None
        end = info.header_offset + _LOCAL_HEADER.size + _name_bytes(info) + info.compress_size
        limit = following.header_offset if following is not None else directory_start
        if end > limit:
            what = f"{following.orig_filename!r}" if following is not None else "the central directory"
            problems.append(ArchiveProblem(info.orig_filename, f"its data overlaps {what} (an overlapping-files bomb)"))
    return problems


def inspect(
    store: ArtifactStore, key: str, size: int, *, max_documents: int | None = None
) -> tuple[list[ArchiveEntry], list[ArchiveProblem]]:
    """The archive's documents in directory order, and every problem found (nothing is read but the directory);
    at most `max_documents` (default: `MAX_DOCUMENTS`)."""
    most = limits.MAX_DOCUMENTS if max_documents is None else max_documents
    if size > limits.MAX_ARCHIVE_BYTES:
        return [], [ArchiveProblem(None, f"the archive is {size} bytes, above {limits.MAX_ARCHIVE_BYTES}", upload=True)]
    reader = RangedObject(store, key, size, max_read=limits.MAX_ARCHIVE_DIRECTORY_BYTES)
    try:
        with zipfile.ZipFile(reader) as archive:
            infos = archive.infolist()
            directory_start = archive.start_dir
    except DirectoryTooLarge:
        return [], [
            ArchiveProblem(
                None, f"its central directory is above {limits.MAX_ARCHIVE_DIRECTORY_BYTES} bytes", upload=True
            )
        ]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, ValueError, EOFError, struct.error):
        return [], [ArchiveProblem(None, "not a ZIP archive", upload=True)]
    problems: list[ArchiveProblem] = []
    entries: list[ArchiveEntry] = []
    seen: set[str] = set()
    members = [info for info in infos if not skipped(info)]
    for info in members:
        name = info.orig_filename
        reason = entry_problem(info) or ("a duplicate name" if name in seen else None)
        seen.add(name)
        if reason:
            problems.append(ArchiveProblem(name, reason))
            continue
        method: Literal[0, 8] = 0 if info.compress_type == STORED else 8
        member = ArchiveMember(
            name=name,
            offset=info.header_offset,
            compressed_size=info.compress_size,
            size=info.file_size,
            method=method,
            crc=info.CRC,
        )
        entries.append(ArchiveEntry(name=name, media_type=media_type_of(name) or "", member=member))
    problems.extend(_overlaps(members, directory_start))
    if not members:
        problems.append(ArchiveProblem(None, "the archive holds no document"))
    if len(members) > most:
        problems.append(ArchiveProblem(None, f"{len(members)} documents, above {most}"))
    expanded = sum(info.file_size for info in members)
    if expanded > limits.MAX_ARCHIVE_EXPANDED_BYTES:
        problems.append(
            ArchiveProblem(None, f"expands to {expanded} bytes, above {limits.MAX_ARCHIVE_EXPANDED_BYTES} in all")
        )
    return entries, problems


def read_member(store: ArtifactStore, key: str, member: ArchiveMember) -> bytes:
    """One member's bytes (two ranged GETs), checked against its declared size and CRC while it is inflated."""
    header = store.get_range(key, member.offset, member.offset + _LOCAL_HEADER.size - 1)
    if len(header) != _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
        raise InvalidInputError(f"document '{member.name}': its local header is missing from the archive")
    name_length, extra_length = _LOCAL_HEADER.unpack(header)[-2:]
    start = member.offset + _LOCAL_HEADER.size + name_length + extra_length
    compressed = store.get_range(key, start, start + member.compressed_size - 1) if member.compressed_size else b""
    if len(compressed) != member.compressed_size:
        raise InvalidInputError(f"document '{member.name}': the archive ends inside it")
    data, complete = compressed, True
    if member.method == DEFLATED:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            # Never more than one byte past the declared size: enough to know the header lied.
            data = inflater.decompress(compressed, member.size + 1)
        except zlib.error as error:
            raise InvalidInputError(f"document '{member.name}': its compressed data is corrupt ({error})") from None
        complete = inflater.eof
    if len(data) != member.size or not complete:
        raise InvalidInputError(
            f"document '{member.name}': its data does not match the {member.size} bytes its archive declares"
        )
    if zlib.crc32(data) != member.crc:
        raise InvalidInputError(f"document '{member.name}': its checksum does not match the archive's")
    return data
