"""XLSX extraction with openpyxl in read-only mode: per sheet, rows batched into "rows" Units.

`ws.reset_dimensions()` is called first (and openpyxl's dimension pre-scan is skipped), so a
sheet that claims A1:XFD1048576 costs only its real cells and each sheet is parsed once. Each non-empty row becomes one line, cells joined with " | " (trailing empty cells
dropped, whole numbers without ".0", dates ISO). Rows are batched 20 per Unit (fewer when the
batch passes ~1,500 characters) with 2 rows of overlap between batches, and the sheet's header
row (its first non-empty row) is repeated at the top of every batch. Unit.sheet and Unit.rows
(1-based, inclusive) say where a batch came from; heading_path is (sheet name,).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits

BATCH_ROWS = 20
OVERLAP_ROWS = 2
BATCH_CHARS = 1500


def extract_xlsx(path: Path, limits: ExtractionLimits) -> Extracted:
    workbook = _load_without_dimension_scan(path)
    builder = TextBuilder(limits.max_extracted_chars)
    try:
        for sheet in workbook.worksheets:
            if hasattr(sheet, "reset_dimensions"):
                sheet.reset_dimensions()
            if not _add_sheet(builder, sheet.title, _lines(sheet)):
                break
        title = (workbook.properties.title or "").strip() or None
    finally:
        workbook.close()
    return builder.build("xlsx", title=title)


def _load_without_dimension_scan(path: Path) -> Any:
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
        return openpyxl.load_workbook(str(path), read_only=True, data_only=True)
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


def _add_sheet(builder: TextBuilder, name: str, lines: Iterator[tuple[int, str]]) -> bool:
    header = next(lines, None)
    if header is None:
        return True
    batch: list[tuple[int, str]] = []
    fresh = 0  # rows in `batch` not yet emitted
    size = 0
    for row in lines:
        batch.append(row)
        fresh += 1
        size += len(row[1]) + 1
        if len(batch) >= BATCH_ROWS or size >= BATCH_CHARS:
            if not _emit(builder, name, header, batch):
                return False
            batch = batch[-OVERLAP_ROWS:] if len(batch) > OVERLAP_ROWS else []
            fresh, size = 0, sum(len(r[1]) + 1 for r in batch)
    if fresh or not builder.units or builder.units[-1].sheet != name:
        return _emit(builder, name, header, batch)
    return True


def _emit(builder: TextBuilder, name: str, header: tuple[int, str], batch: list[tuple[int, str]]) -> bool:
    first = header[0] if not batch or builder.units == [] or builder.units[-1].sheet != name else batch[0][0]
    last = batch[-1][0] if batch else header[0]
    text = "\n".join([header[1]] + [line for _, line in batch])
    return builder.add(text, "rows", sheet=name, rows=(first, last), heading_path=(name,))
