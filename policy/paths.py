"""Lexical path checks for the policy (no I/O: symlinks are the file tools' resolver's job).

Paths are normalised as strings (`os.path.normpath` of the path joined to the current
directory). With no workspace roots configured, a virtual root stands for "the session's
workspace": relative paths that do not climb out of it are inside, absolute paths are outside.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from policy.matchers import MatcherSet
from policy.model import Decision, ask, deny
from policy.rules import Rules

VIRTUAL_ROOT = os.sep + "\x00workspace"  # cannot collide with a real path (NUL)
HARMLESS_WRITE_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


def root_strings(roots: Iterable[Path]) -> tuple[str, ...]:
    out = tuple(os.path.normpath(os.fspath(r)) for r in roots)
    return out or (VIRTUAL_ROOT,)


def normalize(text: str, cwd: str | None, shell: bool = True) -> str | None:
    """The lexically normalised absolute path, or None when unknown (`~`, unknown cwd, NUL, and in
    shell words `$VAR`/backticks; file tools take `$` literally)."""
    if not text or "\x00" in text or text.startswith("~"):
        return None
    if shell and ("$" in text or "`" in text):
        return None
    if os.path.isabs(text):
        return os.path.normpath(text)
    if cwd is None:
        return None
    return os.path.normpath(os.path.join(cwd, text))


def within(path: str, base: str) -> bool:
    """`path` equals `base` or lies below it (prefix siblings like /root_evil vs /root excluded).
    Both are normalised absolute paths (normpath), so a string prefix test is exact."""
    path_c, base_c = os.path.normcase(path), os.path.normcase(base)
    if path_c == base_c:
        return True
    prefix = base_c if base_c.endswith(os.sep) else base_c + os.sep
    return path_c.startswith(prefix)


def inside_roots(path: str, roots: tuple[str, ...]) -> bool:
    return any(within(path, root) for root in roots)


def is_protected(path: str, protected: tuple[str, ...]) -> bool:
    return any(within(path, p) for p in protected)


def _candidates(text: str, normalized: str | None, roots: tuple[str, ...]) -> list[str]:
    """The path as written, resolved and root-relative, each also lower-cased: on a case-insensitive
    file system (macOS, Windows) `.ENV` and `.GIT/config` are `.env` and `.git/config`."""
    out = [text.replace(os.sep, "/")]
    if normalized is not None:
        out.append(normalized.replace(os.sep, "/"))
        for root in roots:
            if normalized != root and within(normalized, root):
                out.append(normalized[len(root.rstrip(os.sep)) + 1 :].replace(os.sep, "/"))
    return list(dict.fromkeys([*out, *(c.lower() for c in out)]))  # once each (as written is often as resolved)


def matches_any(matchers: MatcherSet, text: str, normalized: str | None, roots: tuple[str, ...]) -> bool:
    """Whether any pattern is found in the path (as written, resolved, or root-relative).
    A user pattern that timed out counts as found (fail closed)."""
    if not matchers:
        return False
    return any(matchers.search(candidate) is not False for candidate in _candidates(text, normalized, roots))


def secret_check(rules: Rules, text: str, norm: str | None, roots: tuple[str, ...], layer: str) -> Decision | None:
    """Deny or ask when `text` names a secret (SSH/AWS/GnuPG keys, .env files, /etc/shadow, ...)."""
    if matches_any(rules.secret_deny, text, norm, roots):
        return deny(f"Reading {text!r} is not allowed (a secret store: keys, credentials, tokens).", "critical",
                    f"{layer}.secret_denied")
    if _asks_as_secret(rules.secret_ask, text, norm, roots):
        return ask(f"{text!r} looks like a secret (keys, credentials, .env).", "high", f"{layer}.secret_read")
    return None


def _asks_as_secret(asks: MatcherSet, text: str, norm: str | None, roots: tuple[str, ...]) -> bool:
    """The ask patterns, but for a path inside a workspace root its absolute spellings are not held to the
    shipped patterns that cover an area holding the root below its top (`MatcherSet.not_covering`): the user
    chose to work there (in /root/ws, `^/root` would make every file a secret). Its root-relative spelling
    meets every pattern."""
    if not asks:
        return False
    root = next((r for r in roots if norm is not None and within(norm, r)), None)
    placed = asks if root is None else asks.not_covering(root.replace(os.sep, "/"))
    return any((placed if os.path.isabs(candidate) else asks).search(candidate) is not False
               for candidate in _candidates(text, norm, roots))
