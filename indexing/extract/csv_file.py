"""CSV/TSV extraction: one "row" Unit per record, the header record in every other row's heading
(as XLSX sheets are read), so the chunker's windows of whole rows carry the header with them.

Read: every record's cells joined with " | " (cells trimmed, line breaks inside a quoted cell
folded to spaces, trailing empty cells dropped), Unit.rows = (n, n) with n the 1-based record
number (what a spreadsheet shows when it opens the file). Encoding as for text files (BOM, UTF-8,
GB18030 ⊇ GBK, else UTF-8 with replacement and a warning). The delimiter is sniffed from the
first 64 KB among , ; TAB | (a .tsv file defaults to TAB). Bounded: at most
`max_extracted_chars` x 4 bytes are read; a file whose quoting the csv module rejects is read
again without quote handling, with a warning. Not read: types (every cell is its text as written).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from indexing.extract.builder import TextBuilder
from indexing.extract.text import decode_bytes, read_source
from indexing.extract.xlsx_file import add_rows
from indexing.model import Extracted, ExtractionLimits

_SNIFF_CHARS = 64 * 1024
_DELIMITERS = ",;\t|"


def extract_csv(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    data, more = read_source(path, source, limits.max_extracted_chars * 4 + 4)
    text, encoding, warnings = decode_bytes(data, path.name, final=not more)
    if more:
        warnings.append("only the first part of the file was read (max_extracted_chars)")
    dialect = sniff_dialect(text[:_SNIFF_CHARS], tab=path.suffix.lower() in (".tsv", ".tab"))
    csv.field_size_limit(max(len(text) + 1, 131072))  # a field is never longer than the text
    builder = TextBuilder(limits.max_extracted_chars)
    try:
        add_rows(builder, None, csv_lines(text, dialect))
    except csv.Error as exc:
        builder = TextBuilder(limits.max_extracted_chars)
        warnings.append(f"the quoting is malformed ({exc}); read without quote handling")
        add_rows(builder, None, csv_lines(text, dialect, quotes=False))
    builder.warnings[:0] = warnings
    extracted = builder.build("csv")
    extracted.encoding = encoding
    return extracted


def sniff_dialect(sample: str, tab: bool) -> type[csv.Dialect] | csv.Dialect:
    """The sniffed dialect, else comma (TAB for .tsv)."""
    if tab and "\t" in sample:
        return csv.excel_tab
    try:
        return csv.Sniffer().sniff(sample[: sample.rfind("\n") + 1] or sample, delimiters=_DELIMITERS)
    except csv.Error:
        return csv.excel_tab if tab else csv.excel


def csv_lines(text: str, dialect: type[csv.Dialect] | csv.Dialect, quotes: bool = True) -> Iterator[tuple[int, str]]:
    """(1-based record number, "cell | cell") for each non-empty record; `quotes=False`: quote
    characters are plain text."""
    stream = io.StringIO(text, newline="")
    reader = csv.reader(stream, dialect) if quotes else csv.reader(stream, dialect, quoting=csv.QUOTE_NONE)
    for number, record in enumerate(reader, start=1):
        cells = [" ".join(cell.split()) for cell in record]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield number, " | ".join(cells)
