"""A paged context result computed by one server is served page by page by another server on the same
database: the later pages show that very result (for compact_context it came from the LLM, and a
second summary would differ), never a recomputation."""

from __future__ import annotations

from typing import Any

import pytest

from tools.context_common import paged
from tools.runtime import Runtime

pytestmark = pytest.mark.storage


def test_later_pages_come_from_the_server_that_computed_the_result(settings: Any) -> None:
    messages = [{"role": "user", "content": f"message {i} " + "word " * 400} for i in range(60)]
    computed: list[str] = []

    def compute(tag: str) -> Any:
        def run() -> tuple[Any, ...]:
            computed.append(tag)
            return "openai", [{**m, "content": f"{tag}: {m['content']}"} for m in messages], None, {"by": tag}
        return run

    first, second = Runtime(settings), Runtime(settings)  # two server processes sharing the state
    try:
        page, report = paged(first, "compact", {"m": len(messages)}, 0, compute("first"))
        assert page.next_offset is not None and report == {"by": "first"}
        later, later_report = paged(second, "compact", {"m": len(messages)}, page.next_offset, compute("second"))
        assert computed == ["first"]  # the second server did not compute its own
        assert later.messages[0]["content"].startswith("first:") and later_report == {"by": "first"}
        assert later.offset == page.next_offset
    finally:
        first.close()
        second.close()
