"""Undo simple obfuscation of a command name, so the scanner can judge what would really run.

`$(echo cm0gLXJmIC8= | base64 -d) ...`, `` `printf '\\x72\\x6d'` ... ``, `$(echo mr | rev) ...` and
`X=rm; $X ...`: when a computed command name comes from literal echo/printf output, optionally piped
through base64/base32 -d, rev or xxd -r -p, its text is computed here (pure, bounded) and the scanner
analyses the decoded command line as well. Anything else returns None (the call asks as before).
"""

from __future__ import annotations

import base64
import binascii
import re

from policy.shell_syntax import Command, ParseError, Word, decode_ansi_c, parse

MAX_DECODED = 4096
_VARIABLE = re.compile(r'"?\$(?:\{(\w+)\}|(\w+))"?')


def head_text(head: Word, assigned: dict[str, str]) -> str | None:
    """The text a computed command name stands for, when it can be known without running anything."""
    var = _VARIABLE.fullmatch(head.raw)
    if var:
        return assigned.get(var.group(1) or var.group(2))
    if len(head.subs) != 1 or head.raw.strip('"') not in (f"$({head.subs[0]})", f"`{head.subs[0]}`"):
        return None
    return literal_output(head.subs[0])


def literal_output(source: str) -> str | None:
    """What `source` prints, for a pipeline of a literal echo/printf and decoders; else None."""
    try:
        script = parse(source, 1)
    except ParseError:
        return None
    if len(script) != 1 or not all(isinstance(e, Command) and e.words and not e.redirects for e in script[0]):
        return None
    stages = [e for e in script[0] if isinstance(e, Command)]
    if any(w.dynamic for stage in stages for w in stage.words):
        return None
    data = _produce([w.text for w in stages[0].words])
    for stage in stages[1:]:
        data = None if data is None else _transform([w.text for w in stage.words], data)
    if data is None or len(data) > MAX_DECODED:
        return None
    return data.rstrip("\n")


def _produce(words: list[str]) -> str | None:
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name == "echo":
        flags = [a for a in args[:2] if a in ("-n", "-e", "-ne", "-en", "-E")]
        text = " ".join(args[len(flags):])
        return decode_ansi_c(text) if any("e" in f for f in flags) else text + "\n"
    if name == "printf" and args and "%" not in args[0]:
        return decode_ansi_c(args[0])
    return None


def _transform(words: list[str], data: str) -> str | None:
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    try:
        if name in ("base64", "base32") and any(a in ("-d", "-D", "--decode") for a in args):
            decode = base64.b64decode if name == "base64" else base64.b32decode
            return decode("".join(data.split())).decode("utf-8", "replace")
        if name == "xxd" and "-r" in args and "-p" in args:
            return bytes.fromhex("".join(data.split())).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None
    if name == "rev" and not args:
        return "\n".join(line[::-1] for line in data.rstrip("\n").split("\n")) + "\n"
    return None


__all__ = ["head_text", "literal_output"]
