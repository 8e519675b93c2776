"""What keeps a repository's git configuration and hooks out of a shell command's reach (tools/sandbox.py binds
them read-only: `git_guards`), and what keeps the programs a repository's config names from running under an
auto-allowed git command (`neutral_git_env`).

Both ask git itself what it reads (`git config --list --show-origin --includes`, which runs nothing), as the
user's git outside the sandbox would read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

GIT_CONFIG_NAMES = ("config", "config.worktree", "commondir")
"""What git reads in a git folder as configuration (`commondir` moves config and hooks elsewhere): read-only,
a missing one held by a read-only placeholder (`commondir`: one saying ".", the folder itself)."""


ProgramKey = tuple[Path | None, str]
"""A config key naming a program, and the file that sets it (None: not a file)."""


@dataclass(frozen=True)
class GitGuards:
    pinned: tuple[Path, ...] = ()  # git folders: bound onto themselves (not renamed, removed or replaced)
    files: tuple[Path, ...] = ()  # config files and `.git` files, read-only (missing ones: an empty placeholder)
    folders: tuple[Path, ...] = ()  # hooks folders (and a root's missing `.git`), read-only, missing ones too
    commondirs: tuple[Path, ...] = ()  # missing `commondir` files, held by a read-only file saying "."
    programs: tuple[ProgramKey, ...] = ()  # config keys that name a program (and their files), in any of these
    # repositories' config


def git_guards(roots: Iterable[Path], repos: Iterable[Path] = ()) -> GitGuards:
    """What keeps git configuration and hooks out of a command's reach, for each repository in `roots` (a root
    itself) and `repos` (folders holding a `.git`): every file git reads as configuration or runs as a hook,
    missing ones too (config, config.worktree, commondir, hooks/, the core.hooksPath folder, included config
    files), in its git folder, its common folder, its linked worktrees' and submodules' git folders. A root
    without a `.git` of its own gets an empty read-only `.git` folder: `git init` there fails (git itself
    passes over it to a repository above); a repository a command makes in a new sub-folder is its own."""
    pinned: dict[Path, None] = {}
    files: dict[Path, None] = {}
    folders: dict[Path, None] = {}
    programs: dict[ProgramKey, None] = {}
    roots = list(roots)
    for top in dict.fromkeys([*roots, *repos]):
        dot = top / ".git"
        if dot.is_symlink():
            continue
        if dot.is_dir():
            gitdirs = [dot]
        elif dot.is_file():
            files[dot] = None
            gitdirs = _gitfile_dirs(dot)
        else:
            if top in roots:
                folders[dot] = None
            continue
        firsts = {Path(os.path.realpath(g)) for g in gitdirs[:1]}
        for gitdir in _family(gitdirs):
            pinned[gitdir] = None
            files.update(dict.fromkeys(gitdir / name for name in GIT_CONFIG_NAMES))
            folders[gitdir / "hooks"] = None
            worktree = top if gitdir in firsts else _worktree_of(gitdir)
            read, hooks = config_reads(gitdir, worktree)
            files.update(dict.fromkeys(read))
            programs.update(dict.fromkeys(config_programs(gitdir)))
            if hooks is not None:
                folders[hooks] = None
                if hooks.parent.name == ".husky":  # husky's `_` runs the scripts beside it: hooks too
                    folders[hooks.parent] = None
    missing_common = tuple(f for f in files if f.name == "commondir" and not os.path.lexists(f)
                           and f.parent in pinned)
    return GitGuards(tuple(pinned), tuple(f for f in files if f not in missing_common), tuple(folders),
                     missing_common, tuple(programs))


def _gitfile_dirs(dot: Path) -> list[Path]:
    """The git folder a `.git` file names (`gitdir: ...`) and its common folder (`commondir`), resolved."""
    try:
        text = dot.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return []
    line = next((ln for ln in text.splitlines() if ln.startswith("gitdir:")), None)
    if line is None:
        return []
    gitdir = Path(os.path.realpath(dot.parent / line[len("gitdir:"):].strip()))
    if not (gitdir / "HEAD").is_file():  # not a git folder (a planted `gitdir: .ssh` names any folder)
        return []
    out = [gitdir]
    with contextlib.suppress(OSError):
        common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
        if common and (found := Path(os.path.realpath(gitdir / common))).is_dir():
            out.append(found)
    return out


def _family(gitdirs: list[Path]) -> list[Path]:
    """The git folders and every git folder kept in them: linked worktrees' (`worktrees/*`) and submodules'
    (`modules/**`, nested), resolved."""
    out: dict[Path, None] = {}
    todo = [Path(os.path.realpath(g)) for g in gitdirs]
    while todo:
        gitdir = todo.pop()
        if gitdir in out or not gitdir.is_dir():
            continue
        out[gitdir] = None
        with contextlib.suppress(OSError):
            todo += [w for w in (gitdir / "worktrees").iterdir() if w.is_dir() and not w.is_symlink()]
        todo += _module_dirs(gitdir / "modules")
    return list(out)


def _module_dirs(folder: Path, depth: int = 0) -> list[Path]:
    """The git folders under a `modules` folder (a submodule named `a/b` lies in `modules/a/b`)."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for sub in folder.iterdir():
            if sub.is_symlink() or not sub.is_dir():
                continue
            if (sub / "HEAD").is_file():
                found.append(sub)
            elif depth < 8:
                found += _module_dirs(sub, depth + 1)
    return found


def _worktree_of(gitdir: Path) -> Path | None:
    """A linked worktree's folder (its git folder's `gitdir` file names the worktree's `.git` file); a main
    worktree's: the folder holding `.git`."""
    if gitdir.name == ".git":
        return gitdir.parent
    with contextlib.suppress(OSError):
        named = (gitdir / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
        if named:
            return Path(os.path.realpath(gitdir / named)).parent
    return None


_CONFIG_READS: dict[Path, tuple[tuple[tuple[str, int, int], ...], tuple[Path, ...], Path | None,
                                 tuple[ProgramKey, ...]]] = {}
_CONFIG_READS_LOCK = threading.Lock()


def config_reads(gitdir: Path, worktree: Path | None) -> tuple[tuple[Path, ...], Path | None]:
    """The config files git reads for this git folder (as the user's git outside the sandbox would: system,
    global, local, and every file an include names, existing or not) and its core.hooksPath folder (relative:
    to the worktree). Asked of git itself (`git config --list --show-origin`, which runs nothing), kept until
    one of those files changes."""
    with _CONFIG_READS_LOCK:
        kept = _CONFIG_READS.get(gitdir)
    if kept is not None and kept[0] == _signature([gitdir / "config", *kept[1]]):
        return kept[1], kept[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run([shutil.which("git") or "git", f"--git-dir={gitdir}", "config", "--list",
                               "--show-origin", "--includes", "-z"], capture_output=True, env=env, timeout=10,
                              cwd=worktree or gitdir, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return (), None
    listing = done.stdout.decode("utf-8", "surrogateescape")
    read, hooks = parse_config_list(listing, worktree or gitdir)
    with _CONFIG_READS_LOCK:
        _CONFIG_READS[gitdir] = (_signature([gitdir / "config", *read]), read, hooks,
                                 program_keys(listing, worktree or gitdir))
    return read, hooks


def config_programs(gitdir: Path) -> tuple[ProgramKey, ...]:
    """The program-valued keys `config_reads` found in this git folder's config (call that first)."""
    with _CONFIG_READS_LOCK:
        kept = _CONFIG_READS.get(gitdir)
    return kept[3] if kept is not None else ()


PROGRAM_KEY = re.compile(r"core\.fsmonitor|diff\.external|(?:diff|filter|merge)\..+\.(?:textconv|command|clean|smudge"
                         r"|process|driver)|gpg\.(?:[^.]+\.)?program|gpg\.ssh\.defaultkeycommand", re.IGNORECASE)
"""Config keys whose value git runs as a program (`.gitattributes` picks a diff or filter driver by name)."""
PLAIN_DIFF = 'f() { git diff --no-index --no-ext-diff --no-textconv -- "$2" "$5"; true; }; f'
"""Stands in for an external diff program: git's own diff of the two files it is given."""


def program_keys(listing: str, base: Path) -> tuple[ProgramKey, ...]:
    """The keys in `git config --list --show-origin -z` output that name a program (as git spells them), with
    the file setting each (relative origins: to `base`)."""
    parts = listing.split("\0")
    found: dict[ProgramKey, None] = {}
    for origin, entry in zip(parts[::2], parts[1::2], strict=False):
        key = entry.partition("\n")[0]
        if PROGRAM_KEY.fullmatch(key):
            source = Path(os.path.realpath(base / origin[len("file:"):])) if origin.startswith("file:") else None
            found[(source, key)] = None
    return tuple(found)


def neutral_git_env(programs: Iterable[ProgramKey]) -> dict[str, str]:
    """Environment that makes git run none of the repositories' programs (`programs`: keys `program_keys`
    found) nor hooks, at the precedence of `git -c`: fsmonitor off, hooks from nowhere, textconv `cat`,
    an external diff git's own diff, filters none, signature programs `false`; and no optional locks (a
    read-only `git status` does not try to write the index)."""
    values = {"core.fsmonitor": "false", "core.hooksPath": "/dev/null", "diff.external": PLAIN_DIFF}
    for _, key in programs:
        last = key.rsplit(".", 1)[-1].lower()
        values[key] = ("cat" if last == "textconv" else PLAIN_DIFF if last in ("command", "external")
                       else "false" if key.lower().startswith(("gpg.", "core.fsmonitor")) or last == "driver" else "")
    env = {"GIT_CONFIG_COUNT": str(len(values)), "GIT_OPTIONAL_LOCKS": "0"}
    for i, (key, value) in enumerate(values.items()):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


STALE_COPY_SECONDS = 300.0


def sanitized_configs(programs: Iterable[ProgramKey], folder: Path) -> tuple[tuple[Path, Path], ...]:
    """(copy, original) for each config file that sets a program key: a copy without those keys (made by git
    itself, `git config --file COPY --unset-all KEY`, kept in `folder` until the original changes), which a
    read-only run sees in the original's place. Unlike the environment of `neutral_git_env`, no command can
    undo it (`env -u GIT_CONFIG_COUNT git diff`). A copy that cannot be made: an empty config instead."""
    by_file: dict[Path, list[str]] = {}
    for source, key in programs:
        if source is not None and source.is_file():
            by_file.setdefault(source, []).append(key)
    return tuple((_sanitized(source, keys, folder), source) for source, keys in by_file.items())


def _sanitized(source: Path, keys: list[str], folder: Path) -> Path:
    info = source.stat()
    named = "\0".join([str(source), *sorted(keys)])
    prefix = hashlib.sha256(named.encode("utf-8", "surrogateescape")).hexdigest()[:20]
    copy = folder / f"{prefix}-{info.st_mtime_ns}-{info.st_size}"
    if copy.is_file():
        return copy
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{prefix}-*"):  # a copy of an older version (not one a command may be starting with)
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > STALE_COPY_SECONDS:
                old.unlink()
    work = folder / f".{prefix}-{os.getpid()}-{threading.get_ident()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        work.write_bytes(source.read_bytes())
        for key in keys:
            subprocess.run([shutil.which("git") or "git", "config", "--file", str(work), "--unset-all", key],
                           capture_output=True, env=env, timeout=10, stdin=subprocess.DEVNULL, check=False)
        work.chmod(0o444)
        os.replace(work, copy)
    except (OSError, subprocess.SubprocessError):
        with contextlib.suppress(OSError):
            work.unlink()
        empty = folder / "empty-config"
        if not empty.is_file():
            empty.write_text("")
        return empty
    return copy


def parse_config_list(listing: str, base: Path) -> tuple[tuple[Path, ...], Path | None]:
    """From `git config --list --show-origin -z`: the files read and those includes name (relative to the
    including file; `~/` is the home), and the last core.hooksPath (relative: to `base`)."""
    read: dict[Path, None] = {}
    hooks: Path | None = None
    parts = listing.split("\0")
    for origin, entry in zip(parts[::2], parts[1::2], strict=False):
        if not origin.startswith("file:"):
            continue
        source = Path(os.path.realpath(base / origin[len("file:"):]))  # `..` after links, as the kernel
        read[source] = None
        key, _, value = entry.partition("\n")
        key = key.lower()
        if not value:
            continue
        value = os.path.expanduser(value) if value.startswith("~") else value
        if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
            read[Path(os.path.realpath(source.parent / value))] = None
        elif key == "core.hookspath":
            hooks = Path(os.path.realpath(base / value))
    return tuple(read), hooks


def _signature(paths: Iterable[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in paths:
        try:
            info = os.stat(path)
            out.append((str(path), info.st_mtime_ns, info.st_size))
        except OSError:
            out.append((str(path), -1, -1))
    return tuple(out)
