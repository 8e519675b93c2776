"""The approval page's key (and the grants' seal key): proof that a request comes from the person, which no
sandboxed process can hold (issue 30, finding 4). Through a local TCP relay the page sees the relay, not the sandboxed command, as its
peer; what the command cannot have is a secret that only the person is given.

The key is random, made once per data directory (`approval-page.key`, mode 0600, beside the approvals
database: the data directory is not in the sandbox, no tool may read or write it). The person gets it in
the page's address the server prints when it starts serving HTTP and that `approve --list` prints; a
browser that opened that address once keeps it in a cookie only the page sees (HttpOnly, SameSite=Strict,
path /approvals). Tool results, which the assistant and so its commands see, never carry it."""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "approval-page.key"
GRANT_KEY_FILE = "approvals.key"  # seals granted approvals (store.py): a row changed by plain SQL is no grant
URL_FILE = "approval-page.url"
COOKIE = "generalagent_approvals"
QUERY = "key"


def page_key(data_dir: Path) -> str:
    """The data directory's page key, made on first use."""
    return data_key(data_dir, KEY_FILE)


def data_key(data_dir: Path, name: str) -> str:
    """A random key kept in the data directory's file `name` (0600), made on first use (two processes racing
    agree: O_EXCL)."""
    path = data_dir / name
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    for _ in range(3):
        with contextlib.suppress(FileNotFoundError):
            text = path.read_text(encoding="ascii").strip()
            if len(text) >= 32:
                return text
        key = secrets.token_urlsafe(32)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue  # another process made it: read theirs
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(key + "\n")
        return key
    raise OSError(f"cannot make the approval page key at {path}")


def matches(data_dir: Path, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), page_key(data_dir).encode())


def keyed_url(base: str, data_dir: Path) -> str:
    """The approval page's address with its key (for the person: a terminal, never a tool result)."""
    return f"{base.rstrip('/')}/approvals?{QUERY}={page_key(data_dir)}"


def remember_url(base: str, data_dir: Path) -> str:
    """Write the keyed address for `approve --list` (mode 0600) and return it."""
    url = keyed_url(base, data_dir)
    path = data_dir / URL_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(url + "\n")
    return url


def remembered_url(data_dir: Path) -> str | None:
    try:
        return (data_dir / URL_FILE).read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
