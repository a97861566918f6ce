"""Where a document that is a member of an uploaded archive lies in it: what its stored record keeps, and all the
API function needs of archives (reading and checking them is `longhaul.documents.archives`, imported when used)."""

from typing import Literal

from longhaul.core.model import Model


class ArchiveMember(Model):
    """Where a member's data is in its archive, as the central directory declares it (checked at submission)."""

    name: str
    offset: int  # of its local header
    compressed_size: int
    size: int  # declared expanded size: reading never produces more
    method: Literal[0, 8]  # stored, deflated
    crc: int
