"""What the gate finds on the file system for the pure policy (which does no I/O): the git work trees above
the roots, where a shell command's absolute paths really lead, and a call's path arguments resolved through
symlinks in the roots (the policy then decides what they lead to as well)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from foundation.paths import is_within


def git_tops(roots: tuple[Path, ...]) -> tuple[tuple[Path, Path], ...]:
    """For each root inside a git work tree: (root, the tree's top), the nearest folder at or above the root
    holding `.git` (as git finds it; a few stats, no git run). A shell command's git reads that whole
    repository, which may reach outside the roots (the policy decides with this fact)."""
    out = []
    for root in roots:
        for folder in (root, *root.parents):
            try:
                if os.path.lexists(folder / ".git"):
                    out.append((root, folder))
                    break
            except (OSError, ValueError):
                break
    return tuple(out)


def real_path_resolver(limit: int = 4096) -> Callable[[str], str]:
    """For one shell verdict: where an absolute path really leads (`realpath`, links resolved before `..` as
    the kernel does), kept per path; after `limit` distinct paths (a huge command line) a path counts as
    leading to `/` (outside every root: the command asks)."""
    kept: dict[str, str] = {}

    def real(path: str) -> str:
        if path not in kept:
            if len(kept) >= limit:
                return os.sep
            try:
                kept[path] = os.path.realpath(path)
            except (OSError, ValueError):
                kept[path] = path
        return kept[path]

    return real


def resolved_path_args(args: dict[str, Any], keys: tuple[str, ...], roots: tuple[Path, ...]) -> dict[str, Any] | None:
    """`args` with each path argument (`keys`) replaced by its real path when a symlink leads elsewhere in the
    roots, or None when none does (the file tools refuse a path that leads out of the roots themselves)."""
    out, changed = dict(args), False
    for key in keys:
        value = args.get(key)
        texts = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else []
        real = [_real_path(text, roots) if isinstance(text, str) else text for text in texts]
        if real != list(texts):
            out[key] = real[0] if isinstance(value, str) else real
            changed = True
    return out if changed else None


def _real_path(text: str, roots: tuple[Path, ...]) -> str:
    """The real path `text` names (relative to the first root; links resolved before `..`, as the kernel and
    the file tools do) when a symlink leads to another place in the roots, else `text` itself."""
    if not text or "\x00" in text or text == "~" or text.startswith("~/"):  # refused by the file tools
        return text
    joined = text if os.path.isabs(text) else os.path.join(roots[0], text)
    try:
        real = os.path.realpath(joined)
    except (OSError, ValueError):  # a name the OS cannot take: the tools refuse it
        return text
    return real if real != os.path.normpath(joined) and is_within(Path(real), roots) else text

