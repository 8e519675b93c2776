"""foundation.storage.urls: a driver's message keeps no password, and stays readable."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from foundation.storage.urls import MASK, scrub

MESSAGE = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
PASSWORDS = st.text(st.characters(codec="utf-8", exclude_characters="@/:?#[]%\\ \t\n\r'\""), min_size=1, max_size=12)


def test_a_short_password_leaves_the_message_readable() -> None:
    for password in ("p", "o", "ed", "refuse"):  # parts of words, not words
        assert scrub(MESSAGE, f"postgresql://u:{password}@127.0.0.1:1/db") == MESSAGE


@settings(max_examples=200, deadline=None)
@given(password=PASSWORDS, before=st.sampled_from(["", "x ", "(", "'", "=", ": "]),
       after=st.sampled_from(["", " y", ")", "'", ".", "@host"]))
def test_a_password_written_as_a_word_is_masked(password: str, before: str, after: str) -> None:
    url = f"postgresql://u:{password}@127.0.0.1:1/db"
    for text in (f"{before}{password}{after}", f"password={password}", f"postgresql://u:{password}@h/db failed"):
        scrubbed = scrub(text, url)
        assert MASK in scrubbed and text not in scrubbed, (text, scrubbed)
