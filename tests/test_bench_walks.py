"""bench.walks: the walks of one search, one shell command and one compaction are traced and counted."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import walks


def test_the_three_walks_are_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert walks.main(["--files", "--keep", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    rows = {m.group(1): [int(n) for n in m.group(2, 3, 4, 5, 6)]
            for m in re.finditer(r"^\| (search|shell|compaction) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|", out, re.M)}
    assert set(rows) == {"search", "shell", "compaction"}, out
    for calls, executed, hops, returns, files in rows.values():
        assert calls >= executed >= hops >= returns and hops > 0 and files > 1
    assert "context/messages.py" in out.split("compaction: hops into each file")[1]
    assert "indexing/search.py" in out.split("search: hops into each file")[1].split("shell:")[0]
