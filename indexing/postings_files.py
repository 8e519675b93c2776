"""The postings of one index generation as files: written by a streaming build, opened memory-mapped.

A snapshot is a directory of raw little-endian arrays (`ARRAYS`), the vocabulary (`terms.txt`, one
term a line, in term-id order) and `manifest.json` (written last: the format, generation, weighting
and every array's length). It is written under a temporary name, flushed to disk and renamed into
place, so a directory with the final name is complete; opening checks the manifest, every file's
size and the offsets' ends, and a directory that fails (damaged, cut short, another format) is
rebuilt.

The build reads the chunks in batches and never holds more than one batch of term occurrences:
1. per batch, the term ids of every body and heading go to `body.bin`/`head.bin`, and the batch's
   postings (term id, row, field-weighted tf) sorted by term then row go to three scratch files;
2. once the whole collection is known (document frequencies, average length), the postings are
   regrouped by term a range of terms at a time (each range's slice of every batch, a stable sort
   by term id keeps the rows in order) and weighted with BM25F into `rows.bin`/`weights.bin`.
The arrays are the same, value for value, as a build of everything at once in memory.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from indexing.scoring import Weighting, idf, length_norm, saturate

if TYPE_CHECKING:
    import numpy as np

FORMAT = 2  # 2: each posting's field-weighted term frequency (`tf`), for deltas (`indexing.delta`)
ARRAYS = {  # name -> dtype of the snapshot's arrays (raw files `<name>.bin`)
    "chunk_ids": "<i8", "doc_ids": "<i8", "rows": "<i4", "weights": "<f4", "body": "<i4", "body_off": "<i8",
    "head": "<i4", "head_off": "<i8", "bounds": "<i8", "idf": "<f8", "tf": "<f4",
}
_SCRATCH = {"tid": "<i4", "row": "<i4", "tf": "<f8"}  # a batch's postings, before regrouping by term
PART_POSTINGS = 1_000_000  # postings regrouped at a time (about 60 MB of working arrays)
Row = tuple[int, int, str, str]  # (chunk id, document id, head terms, body terms)


class SnapshotDamaged(Exception):
    """A snapshot directory that cannot be used as it is (it is removed and rebuilt)."""


class _Vocab(dict[str, int]):
    """Term -> id, a new term taking the next id."""

    def __missing__(self, term: str) -> int:
        self[term] = tid = len(self)
        return tid


# -- building ------------------------------------------------------------------------------------


def write_snapshot(target: Path, generation: int, batches: Iterable[Sequence[Row]], weighting: Weighting) -> None:
    """Build the snapshot of `batches` (rows ordered by chunk id) into the new directory `target`."""
    import numpy as np

    target.mkdir(parents=True)
    vocab = _Vocab()
    ids, docs, body_len, head_len = array("q"), array("q"), array("q"), array("q")
    counts = np.zeros(0, dtype=np.int64)  # document frequency per term id
    batch_sizes: list[int] = []
    with _Writers(target, ("body", "head", *(f"scratch_{k}" for k in _SCRATCH))) as out:
        for batch in batches:
            if not batch:
                continue
            body, head, blen, hlen = _term_ids(batch, vocab)
            ids.extend(r[0] for r in batch)
            docs.extend(r[1] for r in batch)
            body_len.extend(blen)
            head_len.extend(hlen)
            out.put("body", body)
            out.put("head", head)
            tid, row, tf = _batch_postings(body, head, blen, hlen, len(ids) - len(batch), weighting)
            for name, values in (("tid", tid), ("row", row), ("tf", tf)):
                out.put(f"scratch_{name}", values.astype(_SCRATCH[name]))
            batch_sizes.append(len(tid))
            df = np.bincount(tid, minlength=len(vocab))
            counts = np.concatenate((counts, np.zeros(len(df) - len(counts), dtype=np.int64))) + df
    n = len(ids)
    blens = np.frombuffer(body_len, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    avgdl = float(blens.mean()) if n and blens.sum() else 1.0
    idfs = idf(n, counts.astype(np.int64), np.log)
    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    tf_exact = True  # every tf is exactly a float32 (sums of 1 and a head_weight such as 2.0 are)
    with _Writers(target, ("rows", "weights", "tf")) as out:
        for rows, weights, tf in _regrouped(target, batch_sizes, bounds, idfs, length_norm(blens, avgdl, weighting),
                                            weighting):
            out.put("rows", rows)
            out.put("weights", weights)
            out.put("tf", tf32 := tf.astype(np.float32))
            tf_exact = tf_exact and bool((tf32 == tf).all())
    for name in _SCRATCH:
        (target / f"scratch_{name}.bin").unlink()
    small = {
        "chunk_ids": np.frombuffer(ids, dtype=np.int64) if n else np.zeros(0, np.int64),
        "doc_ids": np.frombuffer(docs, dtype=np.int64) if n else np.zeros(0, np.int64),
        "body_off": np.concatenate(([0], np.cumsum(blens))),
        "head_off": np.concatenate(([0], np.cumsum(np.frombuffer(head_len, dtype=np.int64) if n else []))),
        "bounds": bounds, "idf": idfs,
    }
    with _Writers(target, tuple(small)) as out:
        for name, values in small.items():
            out.put(name, np.asarray(values, dtype=ARRAYS[name]))
    _write_synced(target / "terms.txt", "\n".join(vocab).encode("utf-8"))
    lengths = {name: (target / f"{name}.bin").stat().st_size // np.dtype(ARRAYS[name]).itemsize for name in ARRAYS}
    manifest = {"format": FORMAT, "generation": generation, "weighting": _weighting(weighting),
                "terms": len(vocab), "lengths": lengths, "tf_exact": tf_exact}
    _write_synced(target / "manifest.json", json.dumps(manifest).encode("utf-8"))


def _term_ids(batch: Sequence[Row], vocab: _Vocab) -> tuple[np.ndarray, np.ndarray, list[int], list[int]]:
    """The batch's body and heading term ids (concatenated, ids in first-seen order: body, then heading,
    row by row) and each row's body and heading lengths."""
    import numpy as np

    body, head = array("i"), array("i")
    blen, hlen = [], []
    get = vocab.__getitem__
    for _cid, _did, head_text, body_text in batch:
        before = len(body)
        body.extend(map(get, body_text.split()))
        blen.append(len(body) - before)
        before = len(head)
        if head_text:
            head.extend(map(get, head_text.split()))
        hlen.append(len(head) - before)
    return np.frombuffer(body, dtype=np.int32), np.frombuffer(head, dtype=np.int32), blen, hlen


def _batch_postings(
    body: np.ndarray, head: np.ndarray, blen: list[int], hlen: list[int], first_row: int, weighting: Weighting
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (term id, row, tf) per distinct term of each row, sorted by term id then row; tf counts
    heading occurrences `head_weight` times (summed in the same order as a whole-index build)."""
    import numpy as np

    n = len(blen)
    local = np.arange(n)
    keys = np.concatenate((
        body.astype(np.int64) * n + np.repeat(local, blen),
        head.astype(np.int64) * n + np.repeat(local, hlen),
    ))
    occurrence = np.concatenate((np.ones(len(body)), np.full(len(head), weighting.head_weight)))
    unique, inverse = np.unique(keys, return_inverse=True)
    tf = np.bincount(inverse, weights=occurrence, minlength=len(unique))
    return unique // n, unique % n + first_row, tf


def _regrouped(
    target: Path, batch_sizes: list[int], bounds: np.ndarray, idfs: np.ndarray, norm: np.ndarray, weighting: Weighting
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The postings grouped by term (rows ascending) with their BM25F weights and tf, a range of terms at a
    time: each batch's slice of the range, concatenated in batch order and stably sorted by term."""
    import numpy as np

    cuts = _term_ranges(bounds)
    starts = np.concatenate(([0], np.cumsum(batch_sizes, dtype=np.int64)))
    # where each range begins in each batch's (sorted) term ids
    at = np.array([
        np.searchsorted(_read(target, "tid", starts[b], batch_sizes[b]), cuts) + starts[b] for b in range(len(batch_sizes))
    ]).reshape(len(batch_sizes), len(cuts))
    for p in range(len(cuts) - 1):
        parts = {name: np.concatenate([_read(target, name, at[b, p], at[b, p + 1] - at[b, p])
                                       for b in range(len(batch_sizes))] or [np.zeros(0, _SCRATCH[name])])
                 for name in _SCRATCH}
        order = np.argsort(parts["tid"], kind="stable")
        tid, row, tf = parts["tid"][order], parts["row"][order], parts["tf"][order]
        yield row.astype(np.int32), saturate(idfs[tid], tf, norm[row], weighting).astype(np.float32), tf


def _term_ranges(bounds: np.ndarray) -> np.ndarray:
    """Term-id cuts (0 .. number of terms) such that each range holds about PART_POSTINGS postings
    (a term with more holds a range of its own)."""
    import numpy as np

    terms = len(bounds) - 1
    cuts = [0]
    while cuts[-1] < terms:
        end = int(np.searchsorted(bounds, bounds[cuts[-1]] + PART_POSTINGS, side="right")) - 1
        cuts.append(min(terms, max(end, cuts[-1] + 1)))
    return np.array(cuts, dtype=np.int64)


def _read(target: Path, name: str, start: int, count: int) -> np.ndarray:
    import numpy as np

    dtype = np.dtype(_SCRATCH[name])
    return np.fromfile(target / f"scratch_{name}.bin", dtype=dtype, count=int(count), offset=int(start) * dtype.itemsize)


class _Writers:
    """Append-only raw array files `<name>.bin` of one directory, flushed to disk when closed."""

    def __init__(self, target: Path, names: Sequence[str]) -> None:
        self.files: dict[str, BinaryIO] = {name: open(target / f"{name}.bin", "ab") for name in names}  # noqa: SIM115

    def put(self, name: str, values: np.ndarray) -> None:
        self.files[name].write(values.tobytes())

    def __enter__(self) -> _Writers:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self.files.values():
            f.flush()
            if exc[0] is None:
                os.fsync(f.fileno())
            f.close()


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _weighting(w: Weighting) -> list[float]:
    return [w.k1, w.b, w.head_weight]


# -- opening -------------------------------------------------------------------------------------


def read_snapshot(directory: Path, generation: int, weighting: Weighting) -> tuple[dict[str, np.ndarray], list[str], bool]:
    """The arrays (memory-mapped), the vocabulary and whether the `tf` array is exact, in `directory`; SnapshotDamaged when it is
    incomplete, damaged, or not of this generation, weighting and format."""
    try:
        manifest = json.loads((directory / "manifest.json").read_bytes())
        if (manifest.get("format"), manifest.get("generation"), manifest.get("weighting")) != (
                FORMAT, generation, _weighting(weighting)):
            raise SnapshotDamaged(f"{directory.name}: another format, generation or weighting")
        arrays = {name: _map(directory / f"{name}.bin", ARRAYS[name], int(manifest["lengths"][name]))
                  for name in ARRAYS}
        words = (directory / "terms.txt").read_bytes().decode("utf-8").split("\n") if manifest["terms"] else []
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SnapshotDamaged(f"{directory.name}: {exc}") from exc
    _check(arrays, len(words), int(manifest["terms"]))
    return arrays, words, manifest.get("tf_exact") is True


def _map(path: Path, dtype: str, length: int) -> np.ndarray:
    import numpy as np

    size = np.dtype(dtype).itemsize * length
    if path.stat().st_size != size:
        raise SnapshotDamaged(f"{path.name}: {path.stat().st_size} bytes, expected {size}")
    if length == 0:
        return np.zeros(0, dtype=dtype)
    # a plain ndarray view of the map: slicing a np.memmap subclass costs ~5 us per slice in numpy's
    # __array_finalize__/__getitem__ (25k slices per 300 queries); the view keeps the map alive
    return np.asarray(np.memmap(path, dtype=dtype, mode="r", shape=(length,)))


def _check(a: dict[str, Any], words: int, terms: int) -> None:
    """The arrays' lengths and ends agree (a cheap check: no file is read whole)."""
    n = len(a["chunk_ids"])
    fine = (
        words == terms and len(a["doc_ids"]) == n and len(a["body_off"]) == len(a["head_off"]) == n + 1
        and len(a["bounds"]) == terms + 1 and len(a["idf"]) == terms and len(a["weights"]) == len(a["rows"]) == len(a["tf"])
        and int(a["body_off"][-1]) == len(a["body"]) and int(a["head_off"][-1]) == len(a["head"])
        and int(a["bounds"][-1]) == len(a["rows"]) and int(a["body_off"][0]) == int(a["bounds"][0]) == 0
    )
    if not fine:
        raise SnapshotDamaged("the arrays' lengths disagree")
