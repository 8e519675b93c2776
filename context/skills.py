"""Skills: folders with a SKILL.md (the open Agent Skills layout Claude and other hosts use).

A SKILL.md starts with YAML front matter (`name`, `description`, optional `license`,
`compatibility`, `allowed-tools`, `metadata`) between `---` lines, then Markdown instructions;
scripts, templates and references may sit beside it. Discovery looks at each configured folder:
a folder with a SKILL.md is one skill, any other folder is searched one level down for skill
folders (like ~/.claude/skills). Fallback roots (the built-in skills) come last and yield quietly to a
skill of the same name. A SKILL.md may map file types to itself (`metadata: {file-types: ".pdf .djvu"}`);
a skills.toml may disable skills and map file types to them (over the SKILL.md's own):

    [skills.pdf]
    auto_load_on_file_types = [".pdf"]

    [skills.old-notes]
    enabled = false

A broken SKILL.md is reported (`SkillCatalog.problems`) and skipped; the rest load. Plain
domain code: no MCP imports, no writes anywhere.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import stat
import threading
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from foundation.errors import InvalidInput, LimitExceeded, NotFound, PathNotAllowed

log = logging.getLogger("generalagent.skills")

SKILL_FILE = "SKILL.md"
MAX_SKILL_MD_BYTES = 256 * 1024
MAX_FRONT_MATTER_CHARS = 16_000
MAX_SKILLS = 500
MAX_LISTED_FILES = 200
MAX_FILE_BYTES = 2 * 1024 * 1024
MAX_WALK_DEPTH = 8
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
EXT_RE = re.compile(r"^\.[a-z0-9][a-z0-9._+-]{0,15}$")
Analyzer = Callable[[str], list[str]]


class SkillFormatError(ValueError):
    """A SKILL.md whose front matter is missing or invalid (the message names the fix)."""


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    folder: Path  # real path
    body: str
    license: str | None = None
    compatibility: str | None = None
    allowed_tools: tuple[str, ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    file_types: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillProblem:
    path: Path
    message: str


@dataclass
class SkillCatalog:
    """The enabled skills by name, plus what was disabled and what could not be loaded."""

    skills: dict[str, Skill] = field(default_factory=dict)
    disabled: list[str] = field(default_factory=list)
    problems: list[SkillProblem] = field(default_factory=list)
    config_path: Path | None = None
    signature: tuple[Any, ...] = ()
    version: int = 0

    def for_file_type(self, path: str | Path) -> Skill | None:
        """The first enabled skill mapped to this file's extension (None when none is)."""
        suffix = Path(path).suffix.lower()
        if not suffix:
            return None
        return next((s for s in self.skills.values() if suffix in s.file_types), None)


# -- parsing -------------------------------------------------------------------------------------


def split_front_matter(text: str) -> tuple[str, str]:
    """(front matter YAML, Markdown body) of a SKILL.md; SkillFormatError when there is none."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise SkillFormatError("it does not start with a '---' line (YAML front matter with name and description)")
    end = re.search(r"^---[ \t]*$", text[4:], re.M)
    if end is None:
        raise SkillFormatError("its front matter has no closing '---' line")
    front = text[4: 4 + end.start()]
    if len(front) > MAX_FRONT_MATTER_CHARS:
        raise SkillFormatError(f"its front matter is longer than {MAX_FRONT_MATTER_CHARS} characters")
    return front, text[4 + end.end():].lstrip("\n")


def load_front_matter(front: str) -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: same safe subset, faster
    try:
        data = yaml.load(front, Loader=loader)  # noqa: S506 (a safe loader)
    except (yaml.YAMLError, RecursionError) as exc:
        detail = " ".join(str(exc).split())[:300]
        raise SkillFormatError(f"its front matter is not valid YAML ({detail})") from None
    if not isinstance(data, dict):
        raise SkillFormatError("its front matter is not a YAML mapping (name: ..., description: ...)")
    return data


def _text_field(data: dict[str, Any], key: str, limit: int, required: bool = False) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise SkillFormatError(f"'{key}' is missing from its front matter")
        return None
    if not isinstance(value, str) or not value.strip():
        raise SkillFormatError(f"'{key}' must be non-empty text")
    if len(value) > limit:
        raise SkillFormatError(f"'{key}' is longer than {limit} characters")
    return " ".join(value.split())


def _name(data: dict[str, Any]) -> str:
    name = _text_field(data, "name", 64, required=True)
    assert name is not None
    if not NAME_RE.match(name):
        raise SkillFormatError(f"name {name!r} must be lowercase letters, digits and single hyphens (max 64)")
    return name


def _allowed_tools(data: dict[str, Any]) -> tuple[str, ...]:
    value = data.get("allowed-tools", data.get("allowed_tools"))
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.replace(",", " ").split())
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise SkillFormatError("'allowed-tools' must be a space-separated string or a list of names")


def _metadata(data: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    value = data.get("metadata")
    if value is None:
        return ()
    scalars = (str, int, float, bool)
    if not isinstance(value, dict) or not all(isinstance(v, scalars) for v in value.values()):
        raise SkillFormatError("'metadata' must be a mapping of names to plain values")
    return tuple((str(k), str(v)[:500]) for k, v in list(value.items())[:50])


def parse_skill(text: str, folder: Path) -> Skill:
    """A Skill from SKILL.md text (SkillFormatError names what is wrong)."""
    front, body = split_front_matter(text)
    data = load_front_matter(front)
    name = _name(data)
    warnings = () if name == folder.name else (f"name {name!r} differs from its folder name {folder.name!r}",)
    return Skill(
        name=name, description=_text_field(data, "description", 1024, required=True) or "", folder=folder,
        body=body, license=_text_field(data, "license", 500), compatibility=_text_field(data, "compatibility", 500),
        allowed_tools=_allowed_tools(data), metadata=_metadata(data), warnings=warnings,
    )


def read_skill(folder: Path) -> Skill:
    """Read and parse `folder/SKILL.md` (bounded); SkillFormatError on any problem."""
    path = folder / SKILL_FILE
    try:
        size = path.stat().st_size
        if size > MAX_SKILL_MD_BYTES:
            raise SkillFormatError(f"it is {size} bytes, over the {MAX_SKILL_MD_BYTES}-byte limit")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError("it is not UTF-8 text") from None
    except OSError as exc:
        raise SkillFormatError(f"it cannot be read ({exc.strerror or exc})") from None
    return parse_skill(text, folder)


# -- configuration (skills.toml) -----------------------------------------------------------------


@dataclass(frozen=True)
class SkillsConfig:
    disabled: frozenset[str] = frozenset()
    file_types: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _extensions(path: Path, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SkillFormatError(f"{path}: [skills.{name}] auto_load_on_file_types must be a list like [\".pdf\"]")
    out = tuple(("." + v.strip().lower().lstrip(".")) for v in value if v.strip())
    bad = [e for e in out if not EXT_RE.match(e)]
    if bad:
        raise SkillFormatError(f"{path}: [skills.{name}] has invalid file types {bad}; write them like \".pdf\"")
    return out


def load_config(path: Path | None) -> SkillsConfig:
    """The skills.toml at `path` ({} when absent); SkillFormatError names the problem."""
    if path is None or not path.is_file():
        return SkillsConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SkillFormatError(f"{path} cannot be read: {exc}") from None
    tables = data.get("skills", {})
    if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
        raise SkillFormatError(f"{path}: 'skills' must be tables like [skills.pdf]")
    disabled = frozenset(name for name, table in tables.items() if table.get("enabled", True) is False)
    types = {name: _extensions(path, name, t["auto_load_on_file_types"])
             for name, t in tables.items() if "auto_load_on_file_types" in t}
    return SkillsConfig(disabled, types)


# -- discovery -----------------------------------------------------------------------------------


def skill_folders(root: Path) -> list[Path]:
    """`root` itself when it holds a SKILL.md, else its (non-hidden) sub-folders that do."""
    if (root / SKILL_FILE).is_file():
        return [Path(os.path.realpath(root))]
    try:
        children = sorted(p for p in root.iterdir() if not p.name.startswith("."))
    except OSError:
        return []
    return [Path(os.path.realpath(p)) for p in children if (p / SKILL_FILE).is_file()]


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def signature(roots: Sequence[Path], config_path: Path | None) -> tuple[Any, ...]:
    """A cheap fingerprint (folder and SKILL.md mtimes, one scandir per root): it changes when skills
    are added, removed or edited, or the config changes."""
    parts: list[Any] = [(str(config_path), _mtime(config_path)) if config_path else None]
    for root in roots:
        parts.append((str(root), _mtime(root), _mtime(root / SKILL_FILE)))
        try:
            with os.scandir(root) as entries:
                parts.extend((e.name, e.stat().st_mtime_ns, _mtime(Path(e.path) / SKILL_FILE))
                             for e in entries if not e.name.startswith(".") and e.is_dir())
        except OSError:
            continue
    return tuple(parts)


def scan(roots: Sequence[Path], config_path: Path | None, fallback: Sequence[Path] = ()) -> SkillCatalog:
    """Load every skill under `roots` (first one wins on a duplicate name), then those under `fallback`
    whose names are not taken; problems are collected."""
    catalog = SkillCatalog(config_path=config_path, signature=signature([*roots, *fallback], config_path))
    try:
        config = load_config(config_path)
    except SkillFormatError as exc:
        catalog.problems.append(SkillProblem(config_path or Path("skills.toml"), f"{exc}; it is ignored"))
        config = SkillsConfig()
    for folder in (f for root in roots for f in skill_folders(root)):
        _add(catalog, config, folder)
    taken = set(catalog.skills) | set(catalog.disabled)
    for folder in (f for root in fallback for f in skill_folders(root)):
        _add(catalog, config, folder, taken)
    for problem in catalog.problems:
        log.error("skill %s: %s", problem.path, problem.message)
    return catalog


def _add(catalog: SkillCatalog, config: SkillsConfig, folder: Path, taken: set[str] | None = None) -> None:
    if len(catalog.skills) + len(catalog.disabled) >= MAX_SKILLS:
        catalog.problems.append(SkillProblem(folder, f"skipped: more than {MAX_SKILLS} skills"))
        return
    try:
        skill = read_skill(folder)
        own = _extensions(folder / SKILL_FILE, skill.name, dict(skill.metadata).get("file-types", "").split())
    except SkillFormatError as exc:
        catalog.problems.append(SkillProblem(folder / SKILL_FILE, f"{exc}; the skill is skipped"))
        return
    if taken is not None and skill.name in taken:
        return  # a built-in skill yields to the user's of the same name
    if skill.name in catalog.skills or skill.name in catalog.disabled:
        catalog.problems.append(SkillProblem(folder, f"a skill named {skill.name!r} was found earlier; skipped"))
    elif skill.name in config.disabled:
        catalog.disabled.append(skill.name)
    else:
        types = config.file_types.get(skill.name, own)
        catalog.skills[skill.name] = dataclasses.replace(skill, file_types=types)


class SkillRegistry:
    """The catalogue, re-scanned when its fingerprint changes (checked at most on each `catalog()`)."""

    def __init__(self, roots: Sequence[Path], config_path: Path | None, fallback: Sequence[Path] = ()) -> None:
        self.roots = list(roots)
        self.fallback = list(fallback)
        self.config_path = config_path
        self._catalog: SkillCatalog | None = None
        self._version = 0
        self._lock = threading.Lock()

    def catalog(self, refresh: bool = False) -> SkillCatalog:
        with self._lock:
            current = self._catalog
            fingerprint = signature([*self.roots, *self.fallback], self.config_path)
            if current is not None and not refresh and fingerprint == current.signature:
                return current
            fresh = scan(self.roots, self.config_path, self.fallback)
            if current is None or _content(fresh) != _content(current):
                self._version += 1
            fresh.version = self._version
            self._catalog = fresh
            return fresh

    @property
    def version(self) -> int:
        """Bumped whenever a scan finds different skills (no scan here)."""
        return self._version

    def get(self, name: str) -> Skill:
        catalog = self.catalog()
        if name in catalog.skills:
            return catalog.skills[name]
        if name in catalog.disabled:
            raise NotFound(f"Skill {name!r} is disabled in {catalog.config_path}.")
        names = sorted(catalog.skills)
        more = f" and {len(names) - 30} more" if len(names) > 30 else ""
        known = ", ".join(names[:30]) + more or "none (see the README's Skills section)"
        raise NotFound(f"No skill {name!r}. Known skills: {known}.")


def _content(catalog: SkillCatalog) -> tuple[Any, ...]:
    return tuple(sorted((s.name, s.description, s.body, s.file_types, str(s.folder)) for s in catalog.skills.values()))


# -- files inside a skill ------------------------------------------------------------------------


def skill_files(skill: Skill, limit: int = MAX_LISTED_FILES) -> tuple[list[str], bool]:
    """Relative paths of the skill's files (not SKILL.md, not hidden, symlinks out of it skipped);
    True when the list was cut at `limit`."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(skill.folder, followlinks=False):
        base = Path(dirpath)
        depth = len(base.relative_to(skill.folder).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and depth < MAX_WALK_DEPTH)
        for name in sorted(filenames):
            path = base / name
            rel = path.relative_to(skill.folder).as_posix()
            if name.startswith(".") or rel == SKILL_FILE or not _inside(path, skill.folder):
                continue
            if len(found) >= limit:
                return found, True
            found.append(rel)
    return found, False


def _inside(path: Path, folder: Path) -> bool:
    real = Path(os.path.realpath(path))
    return real != folder and real.is_relative_to(folder)


def skill_file_path(skill: Skill, relative: str) -> Path:
    """The real path of a file in the skill's folder; PathNotAllowed for anything that leaves it."""
    shown = relative[:200]
    parts = relative.replace("\\", "/").split("/")
    if not relative or "\x00" in relative or relative.startswith("/") or ".." in parts or re.match(r"^[A-Za-z]:", relative):
        raise PathNotAllowed(f"{shown!r} is not a path inside skill {skill.name!r}; use a relative path "
                             "from its file list (no '..').")
    real = Path(os.path.realpath(skill.folder / relative))
    if not _inside(real, skill.folder):
        raise PathNotAllowed(f"{shown!r} leads outside skill {skill.name!r} (a symlink out); it is not served.")
    try:
        info = os.stat(real)
    except OSError:
        raise NotFound(f"Skill {skill.name!r} has no file {shown!r}. Use a name from the skill's file list.") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidInput(f"{shown!r} in skill {skill.name!r} is not a regular file.")
    if info.st_size > MAX_FILE_BYTES:
        raise LimitExceeded(f"{shown!r} in skill {skill.name!r} is {info.st_size} bytes, over {MAX_FILE_BYTES}.")
    return real


def read_skill_file(skill: Skill, relative: str) -> str | bytes:
    """A skill file: text when it is UTF-8, else bytes (confined as skill_file_path says)."""
    data = skill_file_path(skill, relative).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


# -- search --------------------------------------------------------------------------------------

FIELD_WEIGHTS = (("name", 2.0), ("description", 1.0), ("body", 0.3))
BODY_SEARCH_CHARS = 4000


@lru_cache(maxsize=4096)
def _analyzed(text: str) -> tuple[str, ...]:
    from indexing.analyzer import analyze

    return tuple(analyze(text))


def _default_analyzer(text: str) -> list[str]:
    return list(_analyzed(text))  # skills rarely change: their analysed fields are cached


def search(skills: Iterable[Skill], query: str, analyzer: Analyzer = _default_analyzer) -> list[tuple[Skill, float]]:
    """Skills ranked by BM25 over name, description and body (weighted), with the documents' analyzer
    (English stemming, Chinese segmentation); only skills sharing a term with the query."""
    pool = list(skills)
    terms = set(analyzer(query))
    if not pool or not terms:
        return []
    scores = [0.0] * len(pool)
    for name, weight in FIELD_WEIGHTS:
        docs = [analyzer(_field_text(s, name)) for s in pool]
        for i, score in enumerate(_bm25(docs, terms)):
            scores[i] += weight * score
    ranked = [(s, round(v, 4)) for s, v in zip(pool, scores, strict=True) if v > 0]
    return sorted(ranked, key=lambda item: (-item[1], item[0].name))


def _field_text(skill: Skill, name: str) -> str:
    if name == "name":
        return skill.name.replace("-", " ")
    return skill.description if name == "description" else skill.body[:BODY_SEARCH_CHARS]


def _bm25(docs: list[list[str]], terms: set[str]) -> list[float]:
    """Plain BM25 of each doc for `terms`, with the document search's formulas and k1/b (indexing.scoring)."""
    from indexing.scoring import DEFAULT_WEIGHTING as w
    from indexing.scoring import idf, length_norm, saturate

    n = len(docs)
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(t for d in docs for t in set(d) if t in terms)
    out = []
    for doc in docs:
        counts = Counter(t for t in doc if t in terms)
        norm = length_norm(float(len(doc)), avg, w)
        score = 0.0
        for term, tf in counts.items():
            score += saturate(idf(float(n), float(df[term]), math.log), float(tf), norm, w)
        out.append(score)
    return out
