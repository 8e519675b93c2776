"""The new formats end to end: generated HTML, CSV, TSV, EPUB, ODT, ODS, ODP and e-mail files indexed by
index_path and found by search_documents / search_file / read_file through the real SDK client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import connect
from tests.docgen import (
    Heading,
    Slide,
    Table,
    make_docx,
    make_eml,
    make_epub,
    make_odf,
    odp_body,
    ods_body,
    odt_body,
)

pytestmark = [pytest.mark.anyio, pytest.mark.storage]


def fill(workspace: Path) -> None:
    docs = workspace / "docs"
    docs.mkdir()
    (docs / "guide.html").write_text(
        "<title>Harbour guide</title><script>var lighthouseScript = 1;</script><h1>Moorings</h1>"
        "<p>Intro.</p><h2>Tides</h2><p>The spring tide floods the quay twice a month.</p>", encoding="utf-8")
    (docs / "ports.csv").write_bytes("港口,吞吐量\n宁波舟山,12.6\nRotterdam,4.4\n".encode("gbk"))
    (docs / "crew.tsv").write_text("name\trole\nIshmael\tnarrator\n", encoding="utf-8")
    make_epub(docs / "whale.epub", [("Loomings", "<h1>Loomings</h1><p>Call me Ishmael, a sailor.</p>"),
                                    ("Carpet-Bag", "<h1>The Carpet-Bag</h1><p>A harpoon in New Bedford.</p>")])
    make_odf(docs / "plan.odt", "text", odt_body([Heading("Voyage"), "Plan", Heading("Provisions", 2),
                                                 Table([["Item", "Qty"], ["Biscuit", "40"]])]))
    make_odf(docs / "stock.ods", "spreadsheet", ods_body({"Hold": [["Good", "Barrels"], ["Whale oil", 300]]}))
    make_odf(docs / "talk.odp", "presentation", odp_body([Slide("Intro"), Slide("Ambergris", ["rare and precious"])]))
    report = make_docx(workspace / "r.docx", [Heading("Survey"), "Barnacles below the waterline."])
    make_eml(docs / "mail.eml", "Hull survey", "See the attached survey.", attachments=[("survey.docx", report.read_bytes())])


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


async def top(client: Any, query: str) -> dict[str, Any]:
    hits = (await call(client, "search_documents", {"query": query}))["hits"]
    assert hits, query
    return hits[0]  # type: ignore[no-any-return]


async def test_every_new_format_is_indexed_and_found(make_settings: Any, workspace: Path) -> None:
    fill(workspace)
    async with connect(make_settings()) as client:
        report = await call(client, "index_path", {"path": "docs"})
        assert report["indexed"] == 8 and not report["failed"], report

        tide = await top(client, "spring tide quay")
        assert (tide["path"], tide["heading"]) == ("docs/guide.html", "Moorings > Tides")
        assert not (await call(client, "search_documents", {"query": "lighthouseScript"}))["hits"]
        port = await top(client, "宁波舟山")
        assert port["path"] == "docs/ports.csv" and port["heading"] == "港口 | 吞吐量" and port["rows"][0] <= 2
        assert (await top(client, "narrator"))["path"] == "docs/crew.tsv"
        harpoon = await top(client, "harpoon Bedford")
        assert (harpoon["path"], harpoon["heading"]) == ("docs/whale.epub", "The Carpet-Bag")
        biscuit = await top(client, "biscuit")
        assert (biscuit["path"], biscuit["heading"]) == ("docs/plan.odt", "Voyage > Provisions")
        oil = await top(client, "whale oil barrels")
        assert (oil["path"], oil["sheet"]) == ("docs/stock.ods", "Hold")
        amber = await top(client, "ambergris")
        assert (amber["path"], amber["slide"]) == ("docs/talk.odp", 2)
        barnacles = await top(client, "barnacles waterline")
        assert (barnacles["path"], barnacles["heading"]) == ("docs/mail.eml", "mail.eml/survey.docx > Survey")

        found = await call(client, "search_file", {"path": "docs/guide.html", "query": "tide"})
        assert found["searched"] == "index" and found["hits"][0]["heading"] == "Moorings > Tides"
        source = await call(client, "read_file", {"path": "docs/guide.html"})
        assert source["kind"] == "text" and "<script>" in source["content"]  # HTML is edited as source
        mail = await call(client, "read_file", {"path": "docs/mail.eml"})
        assert mail["kind"] == "eml" and "Subject: Hull survey" in mail["content"] and "Barnacles" in mail["content"]
        sheet = await call(client, "read_file", {"path": "docs/stock.ods"})
        assert sheet["location"] == "sheets: Hold"
