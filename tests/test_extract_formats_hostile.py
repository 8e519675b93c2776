"""Hostile and broken HTML, CSV, EPUB, OpenDocument and e-mail files: a clear per-file error or a
warning, never a crash or a hang (each runs under the extraction worker's limits)."""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest

from foundation.errors import ExtractionError, LimitExceeded
from indexing.extract import extract_file
from indexing.model import ExtractionLimits
from tests.docgen import make_eml, make_epub, make_odf, make_zip_bomb_docx, odt_body

LAUGHS = '<!DOCTYPE x [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">' \
         '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'


def rewrite(source: Path, target: Path, replace: dict[str, bytes], compress: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", compress) as new:
        for info in old.infolist():
            new.writestr(info.filename, replace.get(info.filename, old.read(info.filename)))
        for name, data in replace.items():
            if name not in old.namelist():
                new.writestr(name, data)
    return target


def test_epub_zip_bomb_is_refused(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "ok.epub", [("c", "<p>x</p>")])
    bomb = rewrite(book, tmp_path / "bomb.epub", {"OEBPS/text/ch00.xhtml": b"<p>" + b"\0" * (64 * 2**20)})
    assert bomb.stat().st_size < 500_000
    with pytest.raises(ExtractionError, match="zip bomb"):
        extract_file(bomb)


def test_odt_with_too_many_entries_or_no_content(tmp_path: Path) -> None:
    doc = make_odf(tmp_path / "a.odt", "text", odt_body(["x"]))
    with pytest.raises(LimitExceeded, match="zip entries"):
        extract_file(doc, ExtractionLimits(max_zip_entries=2))
    empty = tmp_path / "empty.odt"
    with zipfile.ZipFile(empty, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
    with pytest.raises(ExtractionError, match="not a ODT document"):
        extract_file(empty)


def test_odt_billion_laughs_is_refused(tmp_path: Path) -> None:
    doc = make_odf(tmp_path / "a.odt", "text", odt_body(["x"]))
    evil = rewrite(doc, tmp_path / "laughs.odt", {"content.xml": f'<?xml version="1.0"?>{LAUGHS}<x>&d;</x>'.encode()})
    with pytest.raises(ExtractionError, match="DTD/entities"):
        extract_file(evil)


def test_epub_entities_are_never_expanded(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "ok.epub", [("c", "<p>fine</p>")])
    chapter = f'<?xml version="1.0"?>{LAUGHS}<html><body><p>before &d; after</p></body></html>'.encode()
    opf = f'<?xml version="1.0"?>{LAUGHS}<package>&d;</package>'.encode()
    evil = rewrite(book, tmp_path / "evil.epub", {"OEBPS/text/ch00.xhtml": chapter, "OEBPS/content.opf": opf})
    result = extract_file(evil)
    assert "aaaaaaaaaa" not in result.text and "before" in result.text and len(result.text) < 100
    assert any("name order" in w for w in result.warnings)  # the OPF was refused by defusedxml


def test_encrypted_epub_and_odt_are_clear_errors(tmp_path: Path) -> None:
    book = make_epub(tmp_path / "ok.epub", [("c", "<p>x</p>")])
    encryption = (b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                  b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
                  b'<enc:CipherReference URI="OEBPS/text/ch00.xhtml"/></enc:CipherData></enc:EncryptedData></encryption>')
    drm = rewrite(book, tmp_path / "drm.epub", {"META-INF/encryption.xml": encryption})
    with pytest.raises(ExtractionError, match="DRM"):
        extract_file(drm)
    with pytest.raises(ExtractionError, match="password-protected"):
        extract_file(make_odf(tmp_path / "secret.odt", "text", odt_body(["x"]), encrypted=True))


@pytest.mark.parametrize("name", ["a.odt", "b.ods", "c.odp", "d.epub"])
def test_not_a_zip_or_truncated(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text("just text", encoding="utf-8")
    with pytest.raises(ExtractionError, match="not a zip container"):
        extract_file(path)
    doc = make_odf(tmp_path / "src.odt", "text", odt_body(["x" * 5000]))
    path.write_bytes(doc.read_bytes()[:-200])
    with pytest.raises(ExtractionError, match="damaged"):
        extract_file(path)


def test_ods_huge_repeats_are_bounded(tmp_path: Path) -> None:
    row = ('<table:table-row table:number-rows-repeated="1000000"><table:table-cell table:number-columns-repeated="16384"/>'
           '<table:table-cell table:number-columns-repeated="1000000"><text:p>x</text:p></table:table-cell></table:table-row>')
    body = f'<table:table table:name="S"><table:table-row><table:table-cell><text:p>h</text:p></table:table-cell></table:table-row>{row}</table:table>'
    start = time.monotonic()
    result = extract_file(make_odf(tmp_path / "rep.ods", "spreadsheet", body), ExtractionLimits(max_extracted_chars=200_000))
    assert time.monotonic() - start < 60  # generous: a loaded machine; unbounded it would not finish
    assert len(result.text) <= 200_000 and result.warnings


def test_html_hostile_nesting_and_unclosed_constructs(tmp_path: Path) -> None:
    cases = {
        "deep.html": "<div>" * 200_000 + "deep text" + "</div>" * 10,
        "comments.html": "<!--" + "<a " * 50_000,  # quadratic in html.parser; linear here
        "attrs.html": "<p " + " ".join(f"a{i}='{i}'" for i in range(50_000)) + ">text after attrs",
    }
    for name, markup in cases.items():
        path = tmp_path / name
        path.write_text(markup, encoding="utf-8")
        extract_file(path, ExtractionLimits(timeout_seconds=60))  # no crash, no hang: text or nothing


def test_binary_named_html_and_huge_text(tmp_path: Path) -> None:
    png = tmp_path / "image.html"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    with pytest.raises(ExtractionError, match="binary"):
        extract_file(png)
    big = tmp_path / "big.htm"
    big.write_text("<h1>T</h1>" + "<p>word " * 120_000, encoding="utf-8")
    result = extract_file(big, ExtractionLimits(max_extracted_chars=50_000))
    assert len(result.text) <= 50_000 and "truncated" in result.warnings[0]


def test_csv_with_a_huge_field_and_a_stray_quote(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    path.write_text('a,b\n1,"' + "x" * 3_000_000 + '"\n2,"unclosed\n3,z\n', encoding="utf-8")
    result = extract_file(path, ExtractionLimits(max_extracted_chars=1_000_000))
    assert len(result.text) <= 1_000_000 and result.units[0].heading_path == ()


def test_eml_garbage_bomb_attachment_and_deep_nesting(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.eml"
    garbage.write_bytes(b"\xff\xfe not a mail \r\n\r\n\x01\x02 body?")
    extract_file(garbage)  # whatever it holds is read as headers/body text; no crash
    bomb = make_zip_bomb_docx(tmp_path / "bomb.docx", inflated_mib=64)
    mail = make_eml(tmp_path / "m.eml", "With bomb", "body stays", attachments=[("bomb.docx", bomb.read_bytes())])
    result = extract_file(mail)
    assert "body stays" in result.text and any("zip bomb" in w for w in result.warnings)
    nested = make_eml(tmp_path / "n0.eml", "level 0", "text 0")
    for level in range(1, 8):
        nested = make_eml(tmp_path / f"n{level}.eml", f"level {level}", f"text {level}",
                          attachments=[(f"n{level - 1}.eml", nested.read_bytes())])
    deep = extract_file(nested)
    assert "text 7" in deep.text and "text 4" in deep.text and "text 0" not in deep.text
    assert any("nested more than" in w for w in deep.warnings)
