"""TextBuilder: assembles a document's extracted text from units and records their offsets.

Units are joined with a blank line; each Unit's [start, end) covers its own text only. The builder
enforces `max_extracted_chars`: the unit that crosses the cap is cut and later units are dropped,
with a warning (extraction keeps what fits rather than failing the whole document).
"""

from __future__ import annotations

from indexing.model import Extracted, Unit

SEPARATOR = "\n\n"


class TextBuilder:
    """Accumulates unit texts; `add` returns False once the character cap is reached."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.parts: list[str] = []
        self.units: list[Unit] = []
        self.warnings: list[str] = []
        self.pos = 0
        self.full = False

    def add(self, text: str, kind: str, **location: object) -> bool:
        """Append one unit (skipped when blank). Returns False when the cap is reached."""
        if self.full:
            return False
        text = text.strip()
        if not text:
            return True
        sep = SEPARATOR if self.parts else ""
        room = self.max_chars - self.pos - len(sep)
        if len(text) > room:
            text = text[: max(room, 0)]
            self.full = True
            self.warnings.append(
                f"text truncated at {self.max_chars:,} characters (max_extracted_chars); "
                "the rest of the document is left out"
            )
        if text:
            self.parts.append(sep + text)
            start = self.pos + len(sep)
            self.units.append(Unit(start=start, end=start + len(text), kind=kind, **location))  # type: ignore[arg-type]
            self.pos = start + len(text)
        return not self.full

    def add_extracted(self, extracted: Extracted, root: tuple[str, ...]) -> bool:
        """Append another document's units (their text and locations), each heading path under `root`
        (the parts of a container, e.g. an e-mail's attachments). False once the text cap is reached."""
        units = extracted.units or [Unit(0, len(extracted.text), "text")]
        for unit in units:
            location = {"page": unit.page, "slide": unit.slide, "sheet": unit.sheet, "rows": unit.rows}
            text = extracted.text[unit.start : unit.end]
            if not self.add(text, unit.kind, heading_path=root + unit.heading_path, **location):
                return False
        return True

    def build(self, kind: str, title: str | None = None) -> Extracted:
        return Extracted(text="".join(self.parts), units=self.units, kind=kind, warnings=self.warnings, title=title)
