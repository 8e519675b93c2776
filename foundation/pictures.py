"""Pictures a tool result carries besides its JSON, and the caps they are sent within.

A result model that shows pictures (read_file on an image, render_page) subclasses `WithPictures`; the
pictures live in a private attribute, so they are never in the result's JSON or its output schema. MCP
clients get each one as image content after the JSON text part (mcp_server/server.py); a sub-agent's
model gets them only when its model slot can see (tools/subagent_loop.py).

Caps: the longest side is at most MAX_SIDE px and the encoded bytes at most MAX_BYTES (tools/picture_fit.py
makes a picture fit them, with Pillow).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Self

from pydantic import BaseModel, PrivateAttr

MAX_SIDE = 1568
"""Longest side sent, in px: about what vision models take without scaling down again (~1.2 MP at 4:3)."""
MAX_BYTES = 1_000_000
"""Encoded bytes sent per picture (base64 makes it ~1.33 MB on the wire)."""
IMAGE_FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".gif": "GIF", ".webp": "WEBP"}
"""File suffixes read as pictures, with the format their content must have."""


@dataclass(frozen=True)
class Picture:
    """One encoded picture as sent: its bytes, MIME type and size in px."""

    data: bytes
    mime_type: str
    width: int
    height: int

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.base64()}"


class WithPictures(BaseModel):
    """A result model that may carry pictures (never part of its JSON)."""

    _pictures: list[Picture] = PrivateAttr(default_factory=list)

    def with_pictures(self, pictures: list[Picture]) -> Self:
        self._pictures = list(pictures)
        return self


def pictures_of(result: object) -> list[Picture]:
    """The pictures a tool result carries (none for most results)."""
    return list(result._pictures) if isinstance(result, WithPictures) else []
