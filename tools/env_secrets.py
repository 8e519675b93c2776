"""Credential-bearing environment values, found by their shape (not by the variable's name): what a shell
command must not see (issue 30, finding 7). A variable named `REDIS_URL`, `CACHE`, `HOOK` or `X` may hold
`redis://:pw@host`, a DSN with a password, a webhook URL with its token or a bare API key; the name says
nothing, the value does. Pure functions over strings."""

from __future__ import annotations

import math
import re
from collections import Counter

URL_USERINFO = re.compile(r"[A-Za-z][\w+.-]*://[^/\s?#@]*@")
"""`scheme://user:password@`, `scheme://:password@`, `scheme://token@`: any user information in a URL."""
SECRET_PARAMETER = re.compile(
    r"(?i)(?:^|[?&;\s,])[\w.-]*(?:password|passwd|pwd|pass|secret|token|api[_-]?key|apikey|access[_-]?key|auth"
    r"|credential|signature|sig|key|code)\s*[:=]\s*(?!['\"]?\s*(?:$|[;&,]))")
"""`password=...` in a DSN (`host=db password=x`, `Server=x;Password=y`), a URL's query (`?token=`, `&sig=`)."""
KNOWN_TOKEN = re.compile(
    r"(?:sk-(?:ant-|proj-)?|sk_live_|rk_live_|pk_live_|ghp_|gho_|ghs_|ghu_|ghr_|github_pat_|glpat-|xox[abprs]-"
    r"|npm_|pypi-|hf_|AIza|SG\.|shpat_|dop_v1_)[A-Za-z0-9_.-]{12,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"  # a JSON web token
    r"|-----BEGIN [A-Z ]*PRIVATE KEY|(?i:\b(?:bearer|basic|token)\s+[A-Za-z0-9+/_.=-]{12,})")
WEBHOOK = re.compile(r"(?i)hooks\.slack\.com/|discord(?:app)?\.com/api/webhooks/|webhook\.office\.com/"
                     r"|outlook\.office\.com/webhook|/hooks/|/webhooks?/|chat\.googleapis\.com/")
URL_PART = re.compile(r"[A-Za-z][\w+.-]*://\S+")
TOKENISH = re.compile(r"[A-Za-z0-9+/_=-]{24,}")
MIN_BITS_PER_CHAR = 3.0


def _random_looking(word: str) -> bool:
    """A long run of letters and digits that looks random (a key, a token): both letters and digits, and
    at least 3 bits of entropy a character (English words, paths and version strings are below that)."""
    if not (any(c.isdigit() for c in word) and any(c.isalpha() for c in word)):
        return False
    counts = Counter(word)
    bits = -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())
    return bits >= MIN_BITS_PER_CHAR


def secret_value(value: str) -> bool:
    """Whether an environment value carries a credential, judged by its shape alone."""
    if URL_USERINFO.search(value) or KNOWN_TOKEN.search(value) or SECRET_PARAMETER.search(value):
        return True
    for url in URL_PART.findall(value):
        if WEBHOOK.search(url) or any(_random_looking(w) for w in TOKENISH.findall(url.split("://", 1)[1])):
            return True
    if ":" not in value and "/" not in value and " " not in value:  # a bare value: a key by itself?
        return any(_random_looking(w) for w in TOKENISH.findall(value))
    return False


__all__ = ["secret_value"]
