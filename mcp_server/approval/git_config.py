"""What a repository's own config makes git run (issue 30, finding 6): a fact the gate finds for the policy.

`core.fsmonitor`, `diff.external`, `diff.<driver>.textconv` (named by `.gitattributes`), `filter.<x>.clean`,
`core.pager`, ... in `.git/config` make an allow-listed `git status`/`log -p`/`diff`/`show` run a program. The
sandbox neutralises these keys at run time; the policy also asks for any git command in a repository whose
config names a program. The config is read by git itself (`git config --list --file`, no includes followed:
an `include.path` counts as naming a program, since what it includes is not seen), kept per file signature.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

PROGRAM_KEY = re.compile(
    r"core\.(fsmonitor|pager|editor|sshcommand|askpass|gitproxy)|diff\.external|sequence\.editor"
    r"|(diff|merge|filter|gpg|credential|difftool|mergetool|browser|man|remote|pager|include|includeif)\..*"
    r"|uploadpack\.packobjectshook|web\.browser|man\.viewer"
    r"|.*\.(textconv|command|driver|clean|smudge|process|program|helper|cmd|receivepack|uploadpack)")
"""Config keys (lower-cased) whose value is a program to run, or a file of config not seen: by shape, a key
ending in one of these names, or any key of a section that names programs (`[pager]`, `[include]`,
`[filter "x"]`, ...) but those below. (`core.hooksPath` is not here: no allow-listed git command runs hooks.)"""
HARMLESS = re.compile(
    r"diff\.(algorithm|renames|renamelimit|context|interhunkcontext|mnemonicprefix|noprefix|relative|orderfile"
    r"|colormoved|colormovedws|indentheuristic|submodule|wserrorhighlight|statgraphwidth|statnamewidth|dirstat"
    r"|ignoresubmodules|suppressblankempty|tool|guitool|autorefreshindex|srcprefix|dstprefix)"
    r"|diff\.[^.]+\.(xfuncname|funcname|binary|wordregex|cachetextconv)"
    r"|merge\.(conflictstyle|ff|log|renames|renamelimit|stat|tool|guitool|autostash|verbosity|defaulttoupstream"
    r"|branchdesc|directoryrenames|suppressdest)|merge\.[^.]+\.(name|recursive)"
    r"|remote\.[^\n]*\.(url|pushurl|fetch|push|mirror|skipdefaultupdate|skipfetchall|tagopt|prune|prunetags"
    r"|promisor|partialclonefilter)"
    r"|gpg\.format|credential\.(usehttppath|username)")
"""Keys of those sections that hold no program (`merge.conflictstyle`, `remote.origin.url`)."""
BOOLEAN = frozenset({"", "true", "false", "yes", "no", "on", "off", "0", "1"})
CONFIG_FILES = ("config", "config.worktree")


def names_a_program(key: str, value: str) -> bool:
    """Whether `key=value` (as `git config --list` prints it) makes git run a program (a boolean
    `core.fsmonitor` is git's own daemon)."""
    key = key.lower()
    if key == "core.fsmonitor":
        return value.strip().lower() not in BOOLEAN
    return bool(PROGRAM_KEY.fullmatch(key)) and not HARMLESS.fullmatch(key)


def _git_dir(top: Path) -> list[Path]:
    """The folders whose config files git reads for the work tree at `top` (its git folder, its common one)."""
    dot = top / ".git"
    if dot.is_dir():
        return [dot]
    try:
        text = dot.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("gitdir:")), None)
    if line is None:
        return []
    gitdir = Path(os.path.normpath(top / line[len("gitdir:"):].strip()))
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return [gitdir]
    return [gitdir, Path(os.path.normpath(gitdir / common))]


def _signature(path: Path) -> tuple[str, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=256)
def _programs_of(signature: tuple[str, int, int]) -> tuple[str, ...]:
    git = shutil.which("git")
    if git is None:
        return ()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent",
           "LC_ALL": "C"}
    try:
        done = subprocess.run([git, "config", "--no-includes", "--null", "--list", "--file", signature[0]],
                              env=env, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ("(unreadable config)",)
    if done.returncode != 0:  # git refuses a malformed config before doing anything: nothing runs
        return ()
    found = []
    for entry in done.stdout.decode("utf-8", errors="replace").split("\0"):
        key, _, value = entry.partition("\n")
        if key and names_a_program(key, value):
            found.append(key)
    return tuple(dict.fromkeys(found))


def repository_programs(cwd: str) -> tuple[str, ...]:
    """The program-valued config keys of the repository git would use in `cwd` (the nearest folder at or
    above it holding `.git`), or () when none / no repository."""
    folder = Path(cwd)
    for candidate in (folder, *folder.parents):
        try:
            if not os.path.lexists(candidate / ".git"):
                continue
        except (OSError, ValueError):
            return ()
        found: list[str] = []
        for gitdir in _git_dir(candidate):
            for name in CONFIG_FILES:
                signature = _signature(gitdir / name)
                if signature is not None:
                    found += _programs_of(signature)
        return tuple(dict.fromkeys(found))
    return ()


def program_finder() -> Callable[[str], tuple[str, ...]]:
    """For one verdict: `repository_programs`, kept per folder."""
    return functools.lru_cache(maxsize=64)(repository_programs)
