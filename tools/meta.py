"""Meta tools: facts about the server itself."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field


class NowResult(BaseModel):
    utc: str = Field(description="Current UTC time, ISO 8601, minute precision (e.g. 2026-11-22T03:17Z).")
    weekday: str = Field(description="English weekday name.")


def now() -> NowResult:
    """Current UTC date and time (ISO 8601, minute precision)."""
    current = datetime.now(UTC).replace(second=0, microsecond=0)
    return NowResult(utc=current.strftime("%Y-%m-%dT%H:%MZ"), weekday=current.strftime("%A"))
