"""Database URLs: what counts as a PostgreSQL URL, and the same URL safe to print."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
SCHEMES = ("postgresql", "postgres")
_KEYWORD_PASSWORD = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
_USERINFO_PASSWORD = re.compile(r"(?<=://)([^/@:\s]*):([^/@\s]*)@")


def is_postgres_url(url: str) -> bool:
    return urlsplit(url.strip()).scheme.lower() in SCHEMES


def mask_url(url: str) -> str:
    """`url` with its password (user:PASSWORD@ or ?password=) replaced by ***; never raises."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        if parts.scheme and parts.netloc:
            netloc = parts.netloc
            if "@" in netloc:
                userinfo, host = netloc.rsplit("@", 1)
                user = userinfo.split(":", 1)[0]
                netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{user}@{host}"
            query = urlencode([(k, MASK if k.lower() == "password" else v)
                               for k, v in parse_qsl(parts.query, keep_blank_values=True)], safe="*=-%")
            text = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        text = _USERINFO_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


def password_of(url: str) -> str | None:
    """The password written in `url`, if any (to scrub it from driver messages)."""
    try:
        parts = urlsplit(url.strip())
        found = parts.password
        for key, value in parse_qsl(parts.query):
            if key.lower() == "password":
                found = value
    except ValueError:
        return None
    return found or None


def scrub(text: str, url: str) -> str:
    """`text` (a driver's error message) with the URL's password masked wherever it appears as a word of
    its own (a password `p` leaves "port" readable; inside `password=...` or a URL it is masked anyway)."""
    secret = password_of(url)
    if secret:
        text = re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", MASK, text)
    text = _USERINFO_PASSWORD.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    return _KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)
