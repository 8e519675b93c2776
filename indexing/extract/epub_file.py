"""EPUB extraction: the chapters' XHTML, in spine (reading) order, through the HTML extractor.

Chosen over PyMuPDF's EPUB reader, which lays the book out into pages first: on a generated
30-chapter book it gave 90 layout pages with lines hard-wrapped mid-paragraph and no headings
(no outline without a nav document), and took ~0.6 s; this reader gives one "section" Unit per
chapter heading (`<h1>`-`<h6>`, nested; a chapter's text before its first heading has the
chapter's `<title>` as heading) in a fraction of that.
Read: container.xml → the package (OPF) → its spine's (X)HTML items; the book title (dc:title); the
table of contents (EPUB 3 nav document, EPUB 2 NCX) for the heading of a chapter's text before its
first heading (else the chapter's `<title>`).
Without a readable package, every (X)HTML part is read in name order, with a warning. Not read:
images (their alt text is), the navigation document as such, footnotes' placement, CSS, fonts,
DRM-encrypted books (their chapters are ciphertext: reported as such). Package XML is parsed with
defusedxml; the zip was checked first (safety.py).
"""

from __future__ import annotations

import posixpath
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from foundation.errors import ExtractionError
from indexing.extract.builder import TextBuilder
from indexing.extract.html_file import HEADING_CHARS, Section, add_sections, decode_html, parse_html
from indexing.extract.safety import local_name, safe_xml
from indexing.model import Extracted, ExtractionLimits

_HTML_TYPES = ("application/xhtml+xml", "text/html")
_HTML_SUFFIXES = (".xhtml", ".html", ".htm")


@dataclass
class _Package:
    title: str = ""
    chapters: list[str] = field(default_factory=list)  # part names in spine order
    labels: dict[str, str] = field(default_factory=dict)  # part name -> its first table-of-contents label


def extract_epub(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    builder = TextBuilder(limits.max_extracted_chars)
    with zipfile.ZipFile(source or path) as archive:
        if "META-INF/encryption.xml" in archive.namelist() and _has_encrypted_content(archive):
            raise ExtractionError(f"{path.name} is DRM-protected (its chapters are encrypted); not indexed.")
        package = _reading_order(archive, builder.warnings)
        for name in package.chapters:
            try:
                data = archive.read(name)
            except KeyError:
                builder.warnings.append(f"chapter {name} is listed but missing; skipped")
                continue
            if not add_sections(builder, _chapter_sections(data, name, package.labels.get(name))):
                break
    return builder.build("epub", title=package.title or None)


def _chapter_sections(data: bytes, name: str, label: str | None) -> list[Section]:
    """A chapter's sections; its text before the first heading is headed by its table-of-contents
    label (else its <title>)."""
    markup, _ = decode_html(data, name)
    document = parse_html(markup)
    if label:
        for section in document.sections:
            if section.heading_path in ((), (document.title,)):
                section.heading_path = (label,)
    return document.sections


def _reading_order(archive: zipfile.ZipFile, warnings: list[str]) -> _Package:
    try:
        return _read_package(archive)
    except (KeyError, ValueError, SyntaxError) as exc:  # ParseError is a SyntaxError
        warnings.append(f"the package (OPF) cannot be read ({type(exc).__name__}); chapters read in name order")
    return _Package(chapters=sorted(n for n in archive.namelist() if n.lower().endswith(_HTML_SUFFIXES)))


def _read_package(archive: zipfile.ZipFile) -> _Package:
    container = safe_xml(archive.read("META-INF/container.xml"))
    rootfile = next((e.get("full-path") for e in container.iter() if local_name(e.tag) == "rootfile"), None)
    if not rootfile:
        raise ValueError("no rootfile")
    opf = safe_xml(archive.read(rootfile))
    base = posixpath.dirname(rootfile)
    items = {e.get("id", ""): e for e in opf.iter() if local_name(e.tag) == "item" and e.get("href")}

    def part(item: Element) -> str:
        return posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))

    spine = [items[e.get("idref", "")] for e in opf.iter() if local_name(e.tag) == "itemref" and e.get("idref") in items]
    title = next((" ".join((e.text or "").split()) for e in opf.iter() if local_name(e.tag) == "title"), "")
    chapters = [part(item) for item in spine if item.get("media-type") in _HTML_TYPES and not _is_toc(item)]
    return _Package(title, chapters, _toc_labels(archive, [part(i) for i in items.values() if _is_toc(i)]))


def _is_toc(item: Element) -> bool:
    return "nav" in item.get("properties", "").split() or item.get("media-type") == "application/x-dtbncx+xml"


def _toc_labels(archive: zipfile.ZipFile, tocs: list[str]) -> dict[str, str]:
    """Part name -> first label pointing at it, from the EPUB 3 nav document and/or the EPUB 2 NCX."""
    labels: dict[str, str] = {}
    for toc in tocs:
        try:
            data = archive.read(toc)
            entries = _ncx_entries(data) if toc.lower().endswith(".ncx") else _nav_entries(data)
        except (KeyError, ValueError, SyntaxError):
            continue  # a table of contents is a nicety: the chapters are read without it
        for href, label in entries:
            target = posixpath.normpath(posixpath.join(posixpath.dirname(toc), unquote(href.split("#")[0])))
            if label and href and target not in labels:
                labels[target] = label[:HEADING_CHARS]
    return labels


def _nav_entries(data: bytes) -> list[tuple[str, str]]:
    import lxml.etree

    root = lxml.etree.fromstring(data, lxml.etree.HTMLParser(no_network=True))
    if root is None:
        return []
    return [(a.get("href", ""), " ".join("".join(a.itertext()).split())) for a in root.iter("a")]


def _ncx_entries(data: bytes) -> list[tuple[str, str]]:
    entries = []
    for point in safe_xml(data).iter():
        if local_name(point.tag) == "navPoint":
            text = next((e.text or "" for e in point.iter() if local_name(e.tag) == "text"), "")
            src = next((e.get("src", "") for e in point if local_name(e.tag) == "content"), "")
            entries.append((src, " ".join(text.split())))
    return entries


def _has_encrypted_content(archive: zipfile.ZipFile) -> bool:
    """Whether encryption.xml encrypts more than fonts (font obfuscation is common and harmless)."""
    root = safe_xml(archive.read("META-INF/encryption.xml"))
    targets = [e.get("URI", "") for e in root.iter() if local_name(e.tag) == "CipherReference"]
    return any(t.lower().endswith(_HTML_SUFFIXES) for t in targets)
