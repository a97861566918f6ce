"""Text tables of accounting exports: cells split by `|` or by runs of 2+ spaces, columns named by a header row.

Columns may come in any order and under many names; `column_role` maps a header cell to the role it plays. A data
row is mapped to roles by cell index when it has as many cells as the header, else (space-separated tables, where
an empty cell leaves no trace) by which header column each cell overlaps most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from longhaul.workflows.invoice_reconciliation.amounts import is_amount

Role = Literal["code", "description", "quantity", "unit_price", "line_total", "tax", "tax_rate"]

_CELL_GAP = re.compile(r"\S+(?: \S+)*")
_RULE = re.compile(r"^[\s|:+=_\-–—.*]+$")
_WORD = re.compile(r"[a-z#%]+")

TAX_WORDS = frozenset({"tax", "vat", "gst", "hst", "pst", "qst", "iva", "mwst", "btw", "tva", "ust"})
# Words that say whether an amount includes its tax, rather than name the tax itself.
_TAX_QUALIFIERS = frozenset(
    {"incl", "including", "inclusive", "inc", "excl", "excluding", "exclusive", "ex", "without"}
)
# Specific code labels beat generic ones (a "#" or "No." column is often a line number).
_CODE_SPECIFIC = frozenset({"code", "sku", "part", "article", "art", "catalog", "cat", "product", "upc", "ean"})
_CODE_GENERIC = frozenset({"item", "ref", "reference", "id", "#", "no", "number", "nr"})


@dataclass(frozen=True)
class Cell:
    text: str
    start: int
    end: int


@dataclass(frozen=True)
class Header:
    cells: tuple[Cell, ...]
    roles: tuple[Role | None, ...]
    piped: bool


def is_rule(line: str) -> bool:
    """A separator line: `|---|:--:|`, `-----`, `=====`."""
    return bool(line.strip()) and bool(_RULE.match(line)) and any(c in line for c in "-=_")


def split_cells(line: str) -> tuple[list[Cell], bool]:
    """Cells of a table line and whether it is `|`-separated (empty cells kept there, as they carry position)."""
    if line.count("|") >= 2 or (line.count("|") == 1 and not line.strip().startswith("|")):
        cells: list[Cell] = []
        start = 0
        parts = line.split("|")
        for n, part in enumerate(parts):
            stripped = part.strip()
            offset = start + (len(part) - len(part.lstrip()))
            edge = n in (0, len(parts) - 1)
            if not (edge and not stripped):
                cells.append(Cell(stripped, offset, offset + len(stripped)))
            start += len(part) + 1
        return cells, True
    return [Cell(m.group(), m.start(), m.end()) for m in _CELL_GAP.finditer(line.expandtabs(8))], False


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("qté", "qty")))


def column_role(header: str) -> Role | None:
    """The role of a column named `header`, or None for columns the reconciliation does not use (UoM, discount …).

    A column naming a tax is the line's tax (`VAT`, `Tax amount`) or its rate (`VAT %`, `Tax rate`); one that names
    a tax only to say whether it is in (`Amount incl. VAT`, `Unit price excl. tax`) is the column it qualifies."""
    words = _words(header)
    if words & {"description", "desc", "details", "particulars", "service", "services", "name", "designation"}:
        return "description"
    if words & TAX_WORDS:
        if words & _TAX_QUALIFIERS:
            return column_role(" ".join(sorted(words - TAX_WORDS - _TAX_QUALIFIERS)))
        return "tax_rate" if words & {"%", "rate", "pct", "percent"} else "tax"
    if words & {"disc", "discount", "%"}:
        return None
    if words & {"amount", "total", "ext", "extended", "subtotal", "sum", "net", "value"} and "unit" not in words:
        return "line_total"
    if words & {"price", "rate", "cost", "each", "fee"} or words == {"unit", "amount"}:
        return "unit_price"
    if words & {"qty", "quantity", "units", "hours", "hrs", "count", "pcs", "qte", "volume"}:
        return "quantity"
    if words & (_CODE_SPECIFIC | _CODE_GENERIC):
        return "code"
    return None


def _header_roles(cells: list[Cell]) -> tuple[Role | None, ...]:
    roles = [column_role(cell.text) for cell in cells]
    codes = [i for i, role in enumerate(roles) if role == "code"]
    if len(codes) > 1:
        specific = [i for i in codes if _words(cells[i].text) & _CODE_SPECIFIC] or codes[-1:]
        described = "description" in roles
        for i in codes:
            if i != specific[0]:
                # Beside a code column, an `Item` column names the item (`SKU | Item | Qty …`), not a number.
                named = not described and _words(cells[i].text) & {"item", "article"}
                roles[i] = "description" if named else None
    for role, keep_last in (
        ("line_total", True),
        ("unit_price", False),
        ("quantity", False),
        ("description", False),
        ("tax", False),
        ("tax_rate", False),
    ):
        found = [i for i, r in enumerate(roles) if r == role]
        for i in found[:-1] if keep_last else found[1:]:
            roles[i] = None
    return tuple(roles)


def detect_header(line: str, required: frozenset[Role], one_of: frozenset[Role]) -> Header | None:
    """The header row this line is, if its cells name every `required` role and one of `one_of`."""
    cells, piped = split_cells(line)
    if len(cells) < 2 or any(is_amount(cell.text) for cell in cells if cell.text):
        return None
    roles = _header_roles(cells)
    named = set(roles)
    if not required <= named or not (named & one_of):
        return None
    return Header(tuple(cells), roles, piped)


def _overlap(cell: Cell, start: int, end: int) -> int:
    return max(0, min(cell.end, end) - max(cell.start, start))


def map_row(header: Header, line: str) -> dict[Role, str]:
    """The row's cell text per role (cells of unused columns dropped); empty when the line is not a row of it."""
    cells, piped = split_cells(line)
    if not cells:
        return {}
    if len(cells) == len(header.cells):
        pairs = list(zip(header.roles, (cell.text for cell in cells), strict=True))
    elif piped:
        return {}
    else:
        starts = [cell.start for cell in header.cells]
        spans = [(min(s, c.start), nxt) for s, c, nxt in zip(starts, header.cells, [*starts[1:], 10**6], strict=True)]
        spans[0] = (0, spans[0][1])
        pairs = []
        for cell in cells:
            best = max(range(len(spans)), key=lambda i: (_overlap(cell, *spans[i]), -i))
            if _overlap(cell, *spans[best]) == 0:
                best = max((i for i, (s, _) in enumerate(spans) if s <= cell.start), default=0)
            pairs.append((header.roles[best], cell.text))
    row: dict[Role, str] = {}
    for role, text in pairs:
        if role is not None and text:
            row[role] = f"{row[role]} {text}" if role in row else text
    return row
