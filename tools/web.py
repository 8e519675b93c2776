"""The web, for sub-agents (and the client in the full profile): fetch_url and web_search.

Both are off until the user turns them on (GENERALAGENT_WEB_FETCH_ENABLED, GENERALAGENT_WEB_SEARCH_URL):
they reach the network. Every call passes the approval gate like any tool (rules may name
`fetch_url(https://example.com/*)`). The HTTP work and its guarantees are in tools/web_fetch.py.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from pydantic import BaseModel, Field

from foundation.bounding import next_offset
from foundation.errors import NotConfigured, WebError
from foundation.settings import Settings
from tools.runtime import CallContext, Runtime
from tools.web_fetch import Fetched, FetchLimits, fetch, networks
from tools.web_html import html_to_markdown

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset({"application/json", "application/xml", "application/javascript", "application/ld+json",
                        "application/rss+xml", "application/atom+xml", "application/x-yaml", "application/toml"})
DOCUMENT_TYPES = {
    "application/pdf": ".pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "application/epub+zip": ".epub",
}
MAX_PAGE_CHARS = 40_000
SNIPPET_CHARS = 500
EVERYWHERE = networks(("0.0.0.0/0", "::/0"))  # the search endpoint is the user's own choice (often local)


class WebPage(BaseModel):
    url: str = Field(description="The address read (after redirects).")
    title: str | None = Field(description="The page's title, when it has one.")
    content_type: str = Field(description="What the server said it sent (e.g. text/html, application/pdf).")
    text: str = Field(description="This part of the readable text (Markdown for web pages; pages of a PDF as ## Page N).")
    offset: int = Field(description="Where this part starts in the whole text.")
    total_chars: int = Field(description="Length of the whole readable text.")
    next_offset: int | None = Field(description="Pass as offset for the next part (null: no more).")
    truncated: bool = Field(description="True when the body was larger than web_max_bytes: only its start was read.")
    redirects: list[str] = Field(default_factory=list, description="Redirects followed, in order.")
    extractor: str = Field(description="What made the text: trafilatura, html.parser, text or document.")


def fetch_limits(settings: Settings) -> FetchLimits:
    return FetchLimits(max_bytes=settings.web_max_bytes, timeout_seconds=settings.web_timeout_seconds,
                       max_redirects=settings.web_max_redirects, allow=networks(settings.web_allow_networks))


def fetch_url(
    url: Annotated[str, Field(min_length=1, max_length=4000, description="An http(s) URL of a public page, "
                              "text, JSON, PDF or Office file.")],
    offset: Annotated[int, Field(ge=0, description="Where to start in the readable text (from next_offset).")] = 0,
    max_chars: Annotated[int, Field(ge=500, le=MAX_PAGE_CHARS, description="Most characters to return.")] = 20_000,
    *,
    rt: Runtime,
    call: CallContext,
) -> WebPage:
    """Read a web page (HTTP GET) as readable Markdown text, boilerplate removed; PDF, Office, OpenDocument
    and EPUB files as text. Public addresses only; size, time and redirects are bounded. Off unless the server enables it."""
    settings = rt.settings
    if not settings.web_fetch_enabled:
        raise NotConfigured("fetch_url is off: it reaches the network. To turn it on, set "
                            "GENERALAGENT_WEB_FETCH_ENABLED=1 in the server's environment and restart the server.")
    fetched = fetch(url, fetch_limits(settings), should_cancel=lambda: call.cancelled)
    text, title, extractor = readable(fetched, rt, call)
    part = text[offset: offset + max_chars]
    end = offset + len(part)
    return WebPage(url=fetched.url, title=title, content_type=fetched.content_type or "unknown", text=part,
                   offset=offset, total_chars=len(text), next_offset=next_offset(end, len(text)),
                   truncated=fetched.truncated, redirects=fetched.redirects, extractor=extractor)


def readable(fetched: Fetched, rt: Runtime, call: CallContext) -> tuple[str, str | None, str]:
    """(text, title, extractor) of a response, by its type (and a PDF's magic bytes)."""
    kind = fetched.content_type
    suffix = DOCUMENT_TYPES.get(kind) or (".pdf" if fetched.body.startswith(b"%PDF-") else None)
    if suffix is not None:
        return _document(fetched, suffix, rt, call), None, "document"
    if kind in HTML_TYPES or (not kind and fetched.body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))):
        return html_to_markdown(decode(fetched), fetched.url)
    if kind.startswith("text/") or kind in TEXT_TYPES or kind.endswith(("+json", "+xml")):
        return decode(fetched), None, "text"
    raise WebError(f"{fetched.url[:200]} is {kind or 'of an unknown type'} ({len(fetched.body):,} bytes read): "
                   "fetch_url reads web pages, text, JSON, PDF, Office, OpenDocument and EPUB files.")


def decode(fetched: Fetched) -> str:
    charset = fetched.charset or _meta_charset(fetched.body[:4096]) or "utf-8"
    try:
        return fetched.body.decode(charset, errors="replace")
    except LookupError:
        return fetched.body.decode("utf-8", errors="replace")


def _meta_charset(head: bytes) -> str | None:
    import re

    match = re.search(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_-]{1,40})""", head, re.IGNORECASE)
    return match.group(1).decode("ascii").lower() if match else None


def _document(fetched: Fetched, suffix: str, rt: Runtime, call: CallContext) -> str:
    """A PDF or Office file through our own extractors (the sandboxed extraction worker)."""
    from indexing.extract import extract_file

    if fetched.truncated:
        size = f"{fetched.declared_length / 2**20:,.1f} MiB" if fetched.declared_length else "larger"
        raise WebError(f"{fetched.url[:200]} is a {suffix[1:].upper()} file of {size}, over the "
                       f"{rt.settings.web_max_bytes / 2**20:,.1f} MiB limit (GENERALAGENT_WEB_MAX_BYTES); a cut file "
                       "cannot be read.")
    handle, name = tempfile.mkstemp(suffix=suffix, prefix="fetch-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(fetched.body)
        extracted = extract_file(Path(name), rt.extraction_limits(), should_cancel=lambda: call.cancelled)
    finally:
        os.unlink(name)
    parts = []
    for unit in extracted.units:
        where = f"Page {unit.page}" if unit.page else f"Slide {unit.slide}" if unit.slide else None
        body = extracted.text[unit.start: unit.end].strip()
        parts.append(f"## {where}\n\n{body}" if where else body)
    return "\n\n".join(p for p in parts if p) or "(No text: " + "; ".join(extracted.warnings or ["empty"]) + ")"


class SearchHit(BaseModel):
    title: str = Field(description="The result's title.")
    url: str = Field(description="Its address (read it with fetch_url).")
    snippet: str = Field(description="The search engine's excerpt.")


class SearchResults(BaseModel):
    query: str = Field(description="The query searched.")
    results: list[SearchHit] = Field(description="The results, best first.")
    next_page: int | None = Field(description="Pass as page for more results (null: no more).")


def web_search(
    query: Annotated[str, Field(min_length=1, max_length=500, description="What to search the web for.")],
    max_results: Annotated[int, Field(ge=1, le=20, description="Most results to return.")] = 8,
    page: Annotated[int, Field(ge=1, le=10, description="Result page (from next_page).")] = 1,
    language: Annotated[str | None, Field(max_length=10, description="Result language, e.g. en or zh (default: "
                                                                     "the engine's).")] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> SearchResults:
    """Search the web through the configured SearXNG instance; returns titles, URLs and snippets (read a
    result with fetch_url). Off unless the server has a search endpoint."""
    base = rt.settings.web_search_url
    if not base:
        raise NotConfigured("web_search is off: no search endpoint. Set GENERALAGENT_WEB_SEARCH_URL to a SearXNG "
                            "instance whose settings.yml lists json under search.formats (e.g. "
                            "http://127.0.0.1:8888), then restart the server.")
    params: dict[str, Any] = {"q": query.strip(), "format": "json", "pageno": page}
    if language:
        params["language"] = language
    limits = FetchLimits(max_bytes=2 * 1024 * 1024, timeout_seconds=rt.settings.web_timeout_seconds, max_redirects=2,
                         allow=EVERYWHERE, accept="application/json")
    try:
        fetched = fetch(f"{base.rstrip('/')}/search?{urlencode(params)}", limits, should_cancel=lambda: call.cancelled)
    except WebError as exc:
        hint = " (SearXNG answers 403 when json is not in search.formats of its settings.yml.)" if "403" in str(exc) else ""
        raise WebError(f"The search endpoint failed: {exc}{hint}") from None
    return _search_results(query, fetched, max_results, page)


def _search_results(query: str, fetched: Fetched, max_results: int, page: int) -> SearchResults:
    try:
        data = json.loads(decode(fetched))
        found = data["results"]
        assert isinstance(found, list)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise WebError(f"The search endpoint did not answer with SearXNG JSON ({fetched.content_type or 'no type'}, "
                       f"{len(fetched.body):,} bytes). Check GENERALAGENT_WEB_SEARCH_URL.") from None
    hits = [SearchHit(title=str(r.get("title") or "")[:300], url=str(r.get("url")), snippet=" ".join(
        str(r.get("content") or "").split())[:SNIPPET_CHARS]) for r in found if isinstance(r, dict) and r.get("url")]
    more = len(hits) > max_results or bool(found and page < 10)
    return SearchResults(query=query, results=hits[:max_results], next_page=page + 1 if more and hits else None)
