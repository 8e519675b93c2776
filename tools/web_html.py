"""A web page's readable text as Markdown: trafilatura (the `web` extra: main content, boilerplate such as
menus, footers and cookie banners left out) when installed, the page is under a million characters and it
finds the main text, else the stdlib
html.parser (headings, paragraphs, lists, tables and code; scripts, styles, navigation, headers, footers,
asides and forms left out). Pure functions over a string; no network."""

from __future__ import annotations

import re
from html.parser import HTMLParser

SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "nav", "header", "footer", "aside", "form",
                     "iframe", "button", "select", "head"})
BLOCKS = frozenset({"p", "div", "section", "article", "main", "blockquote", "br", "tr", "table", "ul", "ol", "dl",
                    "dd", "dt", "figure", "figcaption", "hr"})
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "embed", "source", "track", "wbr"})
_BLANK_LINES = re.compile(r"\n{3,}")
_SPACES = re.compile(r"[ \t\r\f\v]+")
TITLE_CHARS = 300
TRAFILATURA_MAX_CHARS = 1_000_000  # its time grows with the page (about 5 s a million characters on a loaded
# 2-core machine); a bigger page goes to the stdlib parser, which is several times faster


def html_to_markdown(html: str, url: str | None = None) -> tuple[str, str | None, str]:
    """(Markdown text, the page's title or None, which extractor made it: trafilatura or html.parser)."""
    title = page_title(html)
    text = _trafilatura(html, url) if len(html) <= TRAFILATURA_MAX_CHARS else None
    if text:
        return text, title, "trafilatura"
    return stdlib_markdown(html), title, "html.parser"


def _trafilatura(html: str, url: str | None) -> str | None:
    try:
        import trafilatura
    except ImportError:
        return None
    try:
        text = trafilatura.extract(html, url=url, output_format="markdown", include_comments=False,
                                   include_tables=True, include_links=False, include_images=False)
    except Exception:  # noqa: BLE001 - a page the library chokes on falls back to the stdlib parser
        return None
    return text.strip() if isinstance(text, str) and text.strip() else None


def page_title(html: str) -> str | None:
    match = re.search(r"<title[^>]*>(.*?)</title\s*>", html[:200_000], re.IGNORECASE | re.DOTALL)
    if not match:
        return None
    from html import unescape

    title = " ".join(unescape(match.group(1)).split())
    return title[:TITLE_CHARS] or None


def stdlib_markdown(html: str) -> str:
    parser = _Markdown()
    parser.feed(html)
    parser.close()
    return parser.text()


class _Markdown(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip_tag: str | None = None  # inside this skipped element (nav, script, ...)
        self.skip_depth = 0  # how many of that tag are open (nested)
        self.pre = 0
        self.cells: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            if tag in BLOCKS and self.skip_tag is None:
                self.out.append("\n")
            return
        if self.skip_tag is not None:
            self.skip_depth += tag == self.skip_tag
            return
        if tag in SKIPPED or _hidden(attrs):
            self.skip_tag, self.skip_depth = tag, 1
            return
        if re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "li":
            self.out.append("\n- ")
        elif tag == "pre":
            self.pre += 1
            self.out.append("\n\n```\n")
        elif tag == "tr":
            self.cells = []
        elif tag in ("td", "th") and self.cells is not None:
            self.cells.append("")
        elif tag in BLOCKS:
            self.out.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_depth -= 1
                if self.skip_depth == 0:
                    self.skip_tag = None
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
            self.out.append("\n```\n\n")
        elif tag == "tr" and self.cells is not None:
            self.out.append("\n| " + " | ".join(" ".join(c.split()) for c in self.cells) + " |")
            self.cells = None
        elif re.fullmatch(r"h[1-6]", tag) or tag in BLOCKS:
            self.out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.skip_tag is not None:
            return
        if self.cells is not None and self.cells:
            self.cells[-1] += data
        elif self.pre:
            self.out.append(data)
        else:
            self.out.append(_SPACES.sub(" ", data.replace("\n", " ")))

    def text(self) -> str:
        lines, code = [], False
        for line in "".join(self.out).split("\n"):
            if line.strip() == "```":
                code = not code
                lines.append("```")
            else:
                lines.append(line.rstrip() if code else line.strip())
        return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _hidden(attrs: list[tuple[str, str | None]]) -> bool:
    values = dict(attrs)
    style = (values.get("style") or "").replace(" ", "").lower()
    return "hidden" in values or values.get("aria-hidden") == "true" or "display:none" in style
