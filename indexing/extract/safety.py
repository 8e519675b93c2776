"""Zip container checks for DOCX/XLSX/PPTX/EPUB/ODF, run BEFORE any parser touches the file.

Refuses: too many entries, a declared total uncompressed size over `max_decompressed_bytes`, a
large entry with an extreme compression ratio (zip bomb), and XML parts that declare a DTD or
entities (`<!DOCTYPE`/`<!ENTITY`: "billion laughs" and external-entity attacks; OOXML and ODF never
need them; EPUB chapters (.xhtml) may declare `<!DOCTYPE html>`: an HTML parser reads them, which
expands no declared entity, and defusedxml its package XML). Headers that lie about sizes cannot
inflate past these checks: Python's `zipfile`, which every reader here reads through, stops at the
declared size and then fails the CRC check, so the declared sizes checked here bound what any parser can ever receive.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import IO
from xml.etree.ElementTree import Element

from foundation.errors import ExtractionError, LimitExceeded
from indexing.model import ExtractionLimits

_RATIO_MIN_BYTES = 1024 * 1024  # small entries may compress extremely well; only large ones are bombs
_HEAD_BYTES = 64 * 1024  # a DTD must come before the root element: scan the start of each XML part
_XML_SUFFIXES = (".xml", ".rels", ".vml")
_NEEDLES = (b"<!doctype", b"<!entity")

OOXML_MAIN_PART = {"docx": "word/", "xlsx": "xl/", "pptx": "ppt/"}
# The part every zipped document of a kind has (a prefix of its name).
MAIN_PART = {
    **OOXML_MAIN_PART, "epub": "META-INF/container.xml", "odt": "content.xml", "ods": "content.xml",
    "odp": "content.xml",
}


def check_office_zip(path: Path, kind: str, limits: ExtractionLimits, source: IO[bytes] | None = None) -> None:
    """Raise ExtractionError / LimitExceeded when the container is broken or hostile (reads `source`
    when given, and rewinds it for the parser)."""
    name = path.name
    try:
        with zipfile.ZipFile(source or path) as archive:
            infos = archive.infolist()
            _check_entries(name, kind, infos, limits)
            for info in infos:
                if info.filename.lower().endswith(_XML_SUFFIXES):
                    _check_xml_head(name, archive, info)
    except zipfile.BadZipFile as exc:
        raise ExtractionError(
            f"{name} is damaged: its {kind.upper()} (zip) container cannot be read ({exc}). "
            "Open and re-save it in an Office application, then index it again."
        ) from exc
    finally:
        if source is not None:
            source.seek(0)


def _check_entries(name: str, kind: str, infos: list[zipfile.ZipInfo], limits: ExtractionLimits) -> None:
    if len(infos) > limits.max_zip_entries:
        raise LimitExceeded(
            f"{name} has {len(infos):,} zip entries, over the limit of {limits.max_zip_entries:,}."
        )
    if not any(i.filename.startswith(MAIN_PART[kind]) for i in infos):
        raise ExtractionError(f"{name} is a zip file but not a {kind.upper()} document (no {MAIN_PART[kind]} part).")
    total = sum(i.file_size for i in infos)
    if total > limits.max_decompressed_bytes:
        raise LimitExceeded(
            f"{name} would expand to {total / 2**20:,.0f} MiB, over the {limits.max_decompressed_bytes / 2**20:,.0f} MiB "
            "limit (max_decompressed_bytes); it is either huge or a zip bomb. Not indexed."
        )
    for info in infos:
        if info.file_size > _RATIO_MIN_BYTES and info.file_size > limits.max_compression_ratio * max(info.compress_size, 1):
            ratio = info.file_size / max(info.compress_size, 1)
            raise ExtractionError(
                f"{name} looks like a zip bomb: part {info.filename} expands {ratio:,.0f}x "
                f"(limit {limits.max_compression_ratio:,.0f}x). Not indexed."
            )


def _check_xml_head(name: str, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    with archive.open(info) as part:
        head = part.read(_HEAD_BYTES).lower()
    if b"\x00" in head:  # UTF-16 encoded part: compare the ASCII bytes only
        head = head.replace(b"\x00", b"")
    if any(needle in head for needle in _NEEDLES):
        raise ExtractionError(
            f"{name} was refused: its part {info.filename} declares a DTD/entities (<!DOCTYPE or <!ENTITY), "
            "which Office files never need and XML entity-expansion attacks use. Not indexed."
        )


def safe_xml(data: bytes) -> Element:
    """Parse one XML part with defusedxml (entity declarations and external references are refused)."""
    import defusedxml.ElementTree

    root: Element = defusedxml.ElementTree.fromstring(data)
    return root


def local_name(tag: object) -> str:
    """An element's tag without its namespace."""
    return str(tag).rsplit("}", 1)[-1]
