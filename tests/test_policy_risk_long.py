"""Long arguments are scanned by the risk patterns without holding the GIL, with the same answers."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from policy import matchers as matchers_module
from policy.matchers import LONG_TEXT_CHARS, Matcher
from policy.rules import load_rules

SHIPPED = [p.matcher for p in load_rules(None).patterns]
SAMPLES = ["-----BEGIN RSA PRIVATE KEY-----", "password=hunter2", "DROP TABLE users", "rm -rf /", "sk-" + "a" * 40,
           "AKIA" + "B" * 16, "nothing to see here"]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SAMPLES), st.text(max_size=40), st.integers(0, 3))
def test_long_texts_get_the_same_answer_as_short_ones(sample: str, noise: str, where: int) -> None:
    padding = "x " * (LONG_TEXT_CHARS // 2 + 1)
    parts = [padding, noise, sample, padding][:where] + [sample] + [padding, noise, padding][where:]
    long_text = " ".join(parts)
    assert len(long_text) > LONG_TEXT_CHARS
    for matcher in SHIPPED:
        expected = re.compile(matcher.source).search(long_text) is not None
        assert matcher.search(long_text) is expected, matcher.source


def test_the_long_path_uses_the_regex_package() -> None:
    matcher = Matcher("secret", re.compile("secret"), None)
    assert matcher.search("x" * (LONG_TEXT_CHARS + 1) + "secret") is True
    assert matcher._released is not None and "regex" in type(matcher._released).__module__
    assert matchers_module.LONG_TEXT_CHARS == LONG_TEXT_CHARS
