"""The policy's path patterns are searched only at the path's start and at its slashes when every match
must start there (`policy/anchors.py`): the answer is always the plain search's, for random
patterns and paths and for the shipped rules; patterns that could start elsewhere are searched as usual."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from policy import load_rules
from policy.anchors import opens_at_slash, search_from_slashes

OPENINGS = ["(^|/)", "^", "/", "^/", "(?:^|/)", "(/|^)", "", "a", "(^|a)", "(?:^)?", "(?<=/)", "(?m)^", "[/]", "\\A"]
BODIES = ["\\.env", "a", "a/b", "[^/]+", "(/|$)", "$", "x(?!y)", ".*", "(?<=a)b", "(a|b)+?", "", "\\n", "[ab]*/"]
TEXTS = st.text(alphabet="/ab.xyenv\n", max_size=30)


@st.composite
def patterns(draw: st.DrawFn) -> re.Pattern[str]:
    branches = draw(st.lists(st.tuples(st.sampled_from(OPENINGS), st.sampled_from(BODIES)), min_size=1, max_size=4))
    source = "|".join(f"(?:{opening}{body})" if draw(st.booleans()) else opening + body for opening, body in branches)
    try:
        return re.compile(source, draw(st.sampled_from([0, re.IGNORECASE, re.DOTALL])))
    except re.error:
        return re.compile("x")


@settings(max_examples=600, deadline=None)
@given(pattern=patterns(), text=TEXTS)
def test_searching_from_slashes_finds_what_a_search_finds(pattern: re.Pattern[str], text: str) -> None:
    if opens_at_slash(pattern):
        assert search_from_slashes(pattern, text) == (pattern.search(text) is not None), (pattern.pattern, text)


def test_what_may_start_elsewhere_is_searched_as_usual() -> None:
    for source in ["^abc|def", "(?m)^x", "(^|/|)x", "(?:^)?x", "(?<=/)x", "x", "(?i:^x)", "a|(^|/)b"]:
        assert not opens_at_slash(re.compile(source)), source
    for source in ["(^|/)\\.env$", "^/etc/x", "/x", "(?:(^|/)a)|(?:^/b)", "(?i)(^|/)x", "[/]x"]:
        assert opens_at_slash(re.compile(source)), source


@settings(max_examples=400, deadline=None)
@given(path=st.text(alphabet="/.aAeEnNvVsShHrRoOtTcdig_-0123456789", max_size=60)
       | st.sampled_from(["/home/u/.ssh/id_rsa", "/w/.env.local", "/w/.env.example", "/etc/shadow", "a/.aws/x",
                          "/proc/1/environ", "/w/id_ed25519_sk", "/root/x", "/w/credentials.json"]))
def test_the_shipped_path_patterns_decide_as_a_plain_search(path: str) -> None:
    rules = load_rules(None)
    for matchers in (rules.secret_deny, rules.secret_ask):
        plain = any(re.search(source, path) for source in matchers.sources)
        assert (matchers.search(path) is not False) == plain, path


def test_the_shipped_secret_patterns_are_searched_from_slashes() -> None:
    """Those that open with `^` or `/` share one alternation searched from slashes (`\\.pem$`: another)."""
    rules = load_rules(None)
    assert [m._at_slashes for m in rules.secret_deny._combined] == [True]
    assert [m._at_slashes for m in rules.secret_ask._combined] == [True, False]
