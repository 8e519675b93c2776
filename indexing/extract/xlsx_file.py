"""XLSX extraction with openpyxl in read-only mode: per sheet, one "row" Unit per non-empty row.

`ws.reset_dimensions()` is called first (and openpyxl's dimension pre-scan is skipped), so a
sheet that claims A1:XFD1048576 costs only its real cells and each sheet is parsed once. Each
non-empty row becomes one line, cells joined with " | " (trailing empty cells dropped, whole
numbers without ".0", dates ISO); a sheet's lines are one block of text, so each row's text is in
the document once. Every row is a Unit (Unit.sheet, Unit.rows = (n, n), 1-based); the header row
(the sheet's first non-empty row) has heading_path (sheet,), the rows below it (sheet, header), so
the chunker's windows of whole rows carry the header with them (see indexing.chunking).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits, Unit

HEADER_CHARS = 300  # of the header row, repeated in the heading of every chunk of the sheet


def extract_xlsx(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    workbook = _load_without_dimension_scan(path, source)
    builder = TextBuilder(limits.max_extracted_chars)
    try:
        for sheet in workbook.worksheets:
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()
            if not add_rows(builder, sheet.title, _lines(sheet)):
                break
        title = (workbook.properties.title or "").strip() or None
    finally:
        workbook.close()
    return builder.build("xlsx", title=title)


def _load_without_dimension_scan(path: Path, source: IO[bytes] | None = None) -> Any:
    """load_workbook(read_only=True) without its per-sheet dimension scan.

    openpyxl reads each sheet's declared size when it opens the workbook; a sheet without a
    <dimension> element (files written by many tools) is parsed completely just for that.
    reset_dimensions() discards the result anyway, so the scan is skipped while loading.
    """
    import openpyxl
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet

    original = ReadOnlyWorksheet.__dict__.get("_get_size")
    if original is not None:
        ReadOnlyWorksheet._get_size = lambda self: None
    try:
        return openpyxl.load_workbook(source or str(path), read_only=True, data_only=True)
    finally:
        if original is not None:
            ReadOnlyWorksheet._get_size = original


def _lines(sheet: Any) -> Iterator[tuple[int, str]]:
    """(1-based row number, "cell | cell") for every non-empty row."""
    for number, row in enumerate(sheet.iter_rows(values_only=True), start=1):
        cells = [_cell_text(v) for v in row]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield number, " | ".join(cells)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return " ".join(value.split()) if "\n" in value or "\t" in value else value.strip()
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def add_rows(builder: TextBuilder, name: str | None, lines: Iterator[tuple[int, str]]) -> bool:
    """Add a sheet's rows as one block of text with one Unit per row; False once the text cap is reached.
    `name`: the sheet's (first in every heading path), or None for a file that is one table (CSV)."""
    room = builder.max_chars - builder.pos
    rows: list[tuple[int, str]] = []
    size = 0
    for number, line in lines:
        line = line.strip()
        if line:
            rows.append((number, line))
            size += len(line) + 1
            if size > room:  # the builder cuts the text here anyway
                break
    if not rows:
        return True
    before = len(builder.units)
    more = builder.add("\n".join(line for _, line in rows), "row", sheet=name)
    if len(builder.units) == before:
        return more
    block = builder.units.pop()
    root: tuple[str, ...] = (name,) if name else ()
    under = (*root, rows[0][1][:HEADER_CHARS])  # one tuple for every row: pickled once to the parent
    pos = block.start
    for i, (number, line) in enumerate(rows):
        end = min(pos + len(line), block.end)
        if end <= pos:
            break
        heading = root if i == 0 else under
        builder.units.append(Unit(pos, end, "row", sheet=name, rows=(number, number), heading_path=heading))
        pos = end + 1
    return more
