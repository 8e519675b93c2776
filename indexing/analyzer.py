"""Text analysis shared by the index and every query: one function, `analyze`.

lowercase -> NFKC -> diacritics folded -> split into Latin/digit words and Han runs ->
Han runs segmented with jieba -> stop/question words of both languages dropped ->
English words stemmed with the classic Porter algorithm (the one SQLite FTS5's `porter`
tokenizer implements). The index stores the analysed terms, so index and query can
never disagree. jieba is imported lazily (first use or the start-up warm-up).

The segmentation is jieba's `lcut(HMM=False)`: its dictionary, its DAG and its best route. jieba-rs
(the `rjieba` package) computes the same in Rust, 8.5x faster (all 124,804 Han runs of the eval
corpora cut identically; tests/test_index_analyzer.py checks random text with user words); it is used
when installed, and jieba itself otherwise (and by the benches' baselines).
"""

from __future__ import annotations

import logging
import os
import pickle
import re
import sys
import threading
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache, partial
from hashlib import sha256
from pathlib import Path
from typing import Any

from foundation.waiting import about_to_wait

ANALYZER_VERSION = "1"
"""Bump when the analysis changes: indexes made with another version are re-analysed on open."""

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_HAN}]+|[^\W_{_HAN}]+")
_MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_HAN_RUN = re.compile(rf"[{_HAN}]")

EN_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his i if in into is it its itself just me more most my
    myself no nor not of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom whose why how will with would
    you your yours yourself yourselves s t many much often""".split()  # noqa: SIM905
)
ZH_STOP = frozenset(
    """的 了 是 在 和 与 及 或 也 都 就 而 被 把 对 为 以 于 从 由 之 其 这 那 这个 那个 这些 那些 啊 吗 呢 吧
    什么 什么样 哪 哪个 哪些 哪里 哪儿 哪一 哪一个 哪一年 哪年 哪位 哪种 谁 何 何时 何地 何种 为什么 为何 怎么
    怎样 怎么样 如何 多少 几 几个 是否 是什么 叫 叫做 称为 请问 呀 着 过 得 地 个 它 他 她 它们 他们 她们""".split()  # noqa: SIM905
)

_jieba_lock = threading.Lock()
_jieba: Any = None
_cache_dir: Path | None = None
_user_words: dict[str, int | None] = {}  # the user dictionary's words (and frequencies), applied to jieba
_user_key = ""
_segmenter: Callable[[str], list[str]] | None = None  # made for `_user_key`'s words
MAX_USER_WORDS = 200_000


def set_cache_dir(path: Path | None) -> None:
    """Keep jieba's dictionary cache in `path` (the data dir) instead of the shared temp dir."""
    global _cache_dir
    _cache_dir = path


def jieba_tokenizer() -> Any:
    """jieba's default tokenizer with its dictionary loaded (thread-safe, loads once)."""
    global _jieba
    if _jieba is None:
        about_to_wait()  # loading the dictionary (~0.5 s, or another thread loading it): not on the event loop
        with _jieba_lock:
            if _jieba is None:
                with _without_pkg_resources():
                    import jieba
                _open_resources_by_absolute_path(jieba)

                jieba.setLogLevel(logging.WARNING)
                if _cache_dir is None or not _load_cached(jieba.dt, _cache_dir):
                    jieba.initialize()
                _apply_words(jieba.dt, {}, _user_words)
                _jieba = jieba.dt
    return _jieba


def analyzer_version() -> str:
    """The analyzer's version, with the user dictionary's words (an index made otherwise is re-analysed)."""
    return f"{ANALYZER_VERSION}+user-{_user_key}" if _user_key else ANALYZER_VERSION


def read_user_words(path: Path) -> dict[str, int | None]:
    """A jieba user dictionary: one word a line, optionally its frequency (`word [freq] [tag]`, jieba's own
    format); blank lines and `#` comments skipped. Raises OSError/UnicodeDecodeError when unreadable."""
    words: dict[str, int | None] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines()[:MAX_USER_WORDS]:
        parts = line.split()
        if parts and not parts[0].startswith("#"):
            words[parts[0]] = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    return words


def set_user_words(words: dict[str, int | None]) -> bool:
    """Use `words` as the user dictionary from now on (the previous ones removed); True when it changed."""
    global _user_words, _user_key, _segmenter
    key = sha256("\n".join(f"{w} {f}" for w, f in sorted(words.items())).encode()).hexdigest()[:12] if words else ""
    with _jieba_lock:
        if key == _user_key:
            return False
        if _jieba is not None:
            _apply_words(_jieba, _user_words, words)
        _user_words, _user_key = dict(words), key
        _segmenter = None  # made again, with these words
    return True


def segmenter() -> Callable[[str], list[str]]:
    """The analysis's cut of a Han run: jieba's `lcut(HMM=False)` with the user dictionary, by jieba-rs when
    installed (see the module docstring). Thread-safe; made once (again after the user words change)."""
    global _segmenter
    made = _segmenter
    if made is not None:
        return made
    about_to_wait()  # loading a dictionary (0.1 s in Rust, ~0.5 s in jieba): not on the event loop
    with _jieba_lock:
        words, key = dict(_user_words), _user_key
    made = _rust_segmenter(words)
    if made is None:
        made = partial(jieba_tokenizer().lcut, HMM=False)
    with _jieba_lock:
        if key == _user_key:
            _segmenter = made
    return made


def _rust_segmenter(words: dict[str, int | None]) -> Callable[[str], list[str]] | None:
    try:
        import rjieba
    except ImportError:
        return None
    rust = rjieba.Jieba()  # jieba's dictionary, built in
    for word, freq in words.items():
        rust.add_word(word, freq, None)  # no frequency: the one that keeps it whole (jieba's suggest_freq)
    return partial(rust.cut, hmm=False)


_original_freq: dict[str, int] = {}  # jieba's own frequency of a user word it already knew


def _apply_words(dt: Any, old: dict[str, int | None], new: dict[str, int | None]) -> None:
    for word in old.keys() - new.keys():
        if word in _original_freq:
            dt.add_word(word, _original_freq.pop(word))  # back to jieba's own entry
        else:
            dt.del_word(word)
    for word, freq in new.items():
        known = dt.FREQ.get(word, 0)
        if known and word not in old:
            _original_freq[word] = known
        dt.add_word(word, freq)


@contextmanager
def _without_pkg_resources() -> Iterator[None]:
    """jieba imports setuptools' pkg_resources only to open its own dict.txt, and that import scans
    every installed distribution (about 0.5 s of start-up); with it blocked, jieba opens the file
    directly (its own fallback). Nothing else here uses pkg_resources."""
    if "pkg_resources" in sys.modules:
        yield
        return
    sys.modules["pkg_resources"] = None  # type: ignore[assignment]  # `import pkg_resources` -> ImportError
    try:
        yield
    finally:
        if "pkg_resources" in sys.modules and sys.modules["pkg_resources"] is None:
            del sys.modules["pkg_resources"]


def _open_resources_by_absolute_path(jieba: Any) -> None:
    """jieba's fallback opener joins its files' path onto os.getcwd(), which fails once the server's
    working folder is gone; open them from jieba's own folder instead (the same files)."""
    from jieba import _compat

    folder = os.path.dirname(os.path.abspath(jieba.__file__))

    def get_module_res(*res: str) -> Any:
        return open(os.path.join(folder, *res), "rb")  # noqa: SIM115 (the caller closes it, as jieba's does)

    jieba.get_module_res = _compat.get_module_res = get_module_res


def _load_cached(dt: Any, folder: Path) -> bool:
    """Load jieba's prefix dictionary from our pickle (3x faster than jieba's marshal cache),
    writing it first when missing. The file lives in the server's data dir, never in /tmp."""
    import jieba

    with jieba.get_dict_file() as dict_file:
        name = f"jieba-{jieba.__version__}-{os.fstat(dict_file.fileno()).st_size}.pickle"
    path = folder / name
    try:
        with path.open("rb") as fh:
            freq, total = pickle.load(fh)
        if not isinstance(freq, dict) or not isinstance(total, int):
            return False
        dt.FREQ, dt.total, dt.initialized = freq, total, True
        return True
    except FileNotFoundError:
        pass
    except Exception:
        return False
    dt.initialize()  # jieba's own way (its marshal cache in the temp dir), then keep our copy
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            pickle.dump((dt.FREQ, dt.total), fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only or vanished data dir: jieba works anyway
    return True


def warm_up(cache_dir: Path | None = None) -> None:
    """Load the segmenter's dictionary now (called in a background thread at server start)."""
    if cache_dir is not None:
        set_cache_dir(cache_dir)
    analyze("预热 warm")


def normalize(text: str) -> str:
    """Lowercase, NFKC, diacritics removed (café -> cafe); CJK text is unchanged."""
    text = unicodedata.normalize("NFKC", text).lower()
    if text.isascii():
        return text
    return _MARKS.sub("", unicodedata.normalize("NFKD", text))


def analyze(text: str) -> list[str]:
    """The index's analysis of `text`: normalised, segmented, stop words dropped, stemmed; in order."""
    out: list[str] = []
    for word in _TOKEN.findall(normalize(text)):
        if _HAN_RUN.match(word):
            for piece in _segment(word):
                if piece not in ZH_STOP and not piece.isspace():
                    out.append(piece)
        elif word not in EN_STOP:
            out.append(stem(word))
    return out


def _segment(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    # HMM off: unknown words (names) become single characters the same way in any context, so a
    # question and its passage agree; with HMM, "潘淑是" in a question never matches "潘淑" (DEV R@1 +0.01).
    return segmenter()(run)


def has_han(text: str) -> bool:
    return _HAN_RUN.search(text) is not None


_HAN_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_LETTER = re.compile(r"[A-Za-z]")


def is_chinese(text: str) -> bool:
    """True for a text written mostly in Chinese: at least one Han character per four Latin letters (an
    English text quoting a Chinese name, or a Chinese one naming English products, stays on its side)."""
    han = len(_HAN_CHAR.findall(text))
    return han > 0 and 4 * han >= len(_LATIN_LETTER.findall(text))


# -- Porter stemmer (M.F. Porter 1980, as in his reference C version and SQLite's fts5_porter.c) --

_VOWELS = frozenset("aeiou")


def _is_cons(w: str, i: int) -> bool:
    c = w[i]
    if c in _VOWELS:
        return False
    if c == "y":
        return i == 0 or not _is_cons(w, i - 1)
    return True


def _measure(stem_: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in `stem_`."""
    m, prev_vowel = 0, False
    for i in range(len(stem_)):
        cons = _is_cons(stem_, i)
        if cons and prev_vowel:
            m += 1
        prev_vowel = not cons
    return m


def _has_vowel(stem_: str) -> bool:
    return any(not _is_cons(stem_, i) for i in range(len(stem_)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _is_cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    if len(w) < 3:
        return False
    n = len(w)
    return _is_cons(w, n - 3) and not _is_cons(w, n - 2) and _is_cons(w, n - 1) and w[-1] not in "wxy"


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, repl in rules:
        if w.endswith(suffix):
            base = w[: len(w) - len(suffix)]
            return base + repl if _measure(base) > min_m else w
    return w


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou", "ism",
    "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _step1(w: str) -> str:
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("eed"):
        return w[:-1] if _measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_cons(w) and w[-1] not in "lsz":
                return w[:-1]
            if _measure(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


def _step4(w: str) -> str:
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: len(w) - len(suffix)]
            if suffix == "ion" and not base.endswith(("s", "t")):
                return w
            return base if _measure(base) > 1 else w
    return w


def _step5(w: str) -> str:
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """Porter stem of a lowercase word; words with non a-z characters or shorter than 3 are kept."""
    if len(word) < 3 or not word.isascii() or not word.isalpha():
        return word
    w = _step1(word)
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2, 0)
    w = _replace(w, _STEP3, 0)
    w = _step4(w)
    return _step5(w)
