"""bench.ann_cost: a smoke run (random vectors, 2,000 of them) prints recall and every stage of both paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("usearch", reason="the semantic extra is not installed")

from bench import ann_cost  # noqa: E402


def test_a_small_run_reports_recall_and_each_stage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert ann_cost.main(["--quick", "--json", str(tmp_path / "out.json")]) == 0
    out = capsys.readouterr().out
    stages = set(re.findall(r"^\| 2,000 \| (exact|approximate) \| ([a-z -]+) \|", out, re.M))
    assert stages == {(p, s) for p in ("exact", "approximate") for s in ("moments", "nearest", "z-scores", "dense total")}, out
    numbers = json.loads((tmp_path / "out.json").read_text())
    assert numbers["recall@50 2000"] > 0.9  # 2,000 random vectors: the graph finds almost all of the exact 50
    assert numbers["build s 2000"] >= 0 and numbers["memory MiB 2000"] > 0
