"""Credential-bearing environment values are scrubbed by their shape, whatever the variable's name (issue 30,
finding 7): `redis://:pw@host`, DSNs with passwords, webhook URLs with tokens, bare API keys and JWTs never
reach a shell command; ordinary values (paths, plain URLs, words, numbers, colours) do."""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.approval_helpers import elicitation_answer
from tests.conftest import connect
from tools.bash import scrubbed_env
from tools.env_secrets import secret_value

NAME = st.from_regex(r"[A-Z][A-Z0-9_]{0,12}", fullmatch=True).filter(
    lambda n: not any(w in n for w in ("KEY", "TOKEN", "SECRET", "PASS", "PWD", "CRED", "PRIV", "AUTH", "COOKIE")))
ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
SECRET = st.tuples(st.randoms(use_true_random=False), st.integers(12, 32)).map(
    lambda r: "".join(r[0].choice(ALNUM) for _ in range(r[1])) + "7q")
"""A generated password or key: random letters and digits, as a generator or a person makes them."""


def _bits_per_char(word: str) -> float:
    counts = Counter(word)
    return -sum(n / len(word) * math.log2(n / len(word)) for n in counts.values())


GENERATED_KEY = SECRET.filter(lambda key: _bits_per_char(key) >= 3.5)
"""A bare key as key generators make them: a bare value carries no structure, only its randomness (hypothesis
otherwise shrinks its random source to 'aaaaaaaaaaaa7q', which is no key anyone's generator makes)."""
HOST = st.sampled_from(["db", "localhost", "10.0.0.5", "cache.internal", "db.example.com:5432"])
USER = st.sampled_from(["", "app", "admin", "u_1"])
SCHEME = st.sampled_from(["redis", "rediss", "postgres", "postgresql", "mysql", "mongodb+srv", "amqp", "https", "ftp"])


@st.composite
def credential(draw: st.DrawFn) -> tuple[str, str]:
    """(a value carrying `secret`, secret)."""
    shape = draw(st.sampled_from(["userinfo", "dsn", "ado", "query", "webhook", "token", "bare", "bearer", "jdbc"]))
    secret = draw(GENERATED_KEY if shape == "bare" else SECRET)
    host, user = draw(HOST), draw(USER)
    value = {
        "userinfo": f"{draw(SCHEME)}://{user}:{secret}@{host}/0",
        "dsn": f"host={host} port=5432 user={user or 'x'} password={secret} dbname=app",
        "ado": f"Server={host};Database=app;User Id={user or 'x'};Password={secret};",
        "query": f"https://{host}/api?{draw(st.sampled_from(['token', 'access_token', 'api_key', 'sig', 'key']))}={secret}",
        "webhook": f"https://hooks.slack.com/services/T0{secret[:6]}/B0{secret[:5]}/{secret}",
        "token": draw(st.sampled_from(["ghp_", "sk-", "xoxb-", "glpat-", "hf_", "npm_"])) + secret + "abcdEF12",
        "bare": secret + (draw(GENERATED_KEY) if shape == "bare" else ""),
        "bearer": f"Bearer {secret}xY12",
        "jdbc": f"jdbc:mysql://{host}/app?user={user or 'x'}&password={secret}",
    }[shape]
    return value, secret


@settings(max_examples=500, deadline=None)
@given(name=NAME, case=credential())
def test_a_credential_in_any_variable_is_scrubbed(tmp_path_factory: Any, name: str, case: tuple[str, str]) -> None:
    value, secret = case
    assert secret_value(value), value
    env = scrubbed_env({name: value, "PATH": "/usr/bin"}, Path("/w"), Path("/h"))
    assert all(secret not in v for v in env.values()), (name, value)


ORDINARY = st.one_of(
    st.sampled_from(["/usr/local/bin:/usr/bin:/bin", "en_US.UTF-8", "xterm-256color", "vi", "1", "true", "/home/u",
                     "https://pypi.org/simple", "http://localhost:8080/", "https://example.org/docs/index.html",
                     "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33", "-R", "main", "3.11.4", "C.UTF-8", "/run/user/0/bus",
                     "unix:path=/run/user/1000/bus", "postgres://db/app", "redis://localhost:6379/0",
                     "--color=auto", "Europe/Berlin", ":0", "UTF-8", "/tmp/ssh-abc/agent.123"]),
    st.from_regex(r"[a-z]{1,12}( [a-z]{1,12}){0,3}", fullmatch=True),
    st.integers(0, 10**9).map(str),
    st.from_regex(r"(/[a-z_.-]{1,10}){1,5}", fullmatch=True),
)


@settings(max_examples=500, deadline=None)
@given(name=NAME, value=ORDINARY)
def test_ordinary_values_are_kept(name: str, value: str) -> None:
    assert not secret_value(value), value


@pytest.mark.anyio
async def test_a_shell_command_does_not_see_credentials_in_innocent_variables(make_settings: Any,
                                                                              monkeypatch: Any) -> None:
    """End to end: before, `env` printed REDIS_URL=redis://:pw@… and a webhook URL with its token."""
    monkeypatch.setenv("CACHE_URL", "redis://:Hunter2Pw9x@cache:6379/0")
    monkeypatch.setenv("NOTIFY", "https://hooks.slack.com/services/T000/B000/XyZ123abcDEF456ghi")
    monkeypatch.setenv("DB_DSN", "host=db user=app password=Sw0rdfishQ dbname=x")
    monkeypatch.setenv("PLAIN_SETTING", "visible-value")
    async with connect(make_settings(bash_enabled=True), elicitation_callback=elicitation_answer("accept")) as client:
        result = await client.call_tool("run_bash_command", {"command": "printenv"})
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert "visible-value" in text, text
    for secret in ("Hunter2Pw9x", "XyZ123abcDEF456ghi", "Sw0rdfishQ"):
        assert secret not in text
    assert os.environ["CACHE_URL"]  # the server's own environment is untouched
