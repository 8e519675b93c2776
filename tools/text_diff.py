"""The text side of edit_file: how often old_string occurs (or why it cannot be replaced), and the small
bounded unified diff its result shows."""

from __future__ import annotations

import difflib
import re

from foundation.errors import InvalidInput, NotFound

MAX_DIFF_LINES = 80
MAX_DIFF_LINE_CHARS = 400
MAX_DIFF_CHARS = 8000
MAX_DIFF_MIDDLE_LINES = 4000


def count_or_raise(text: str, old: str, path: str, replace_all: bool) -> int:
    count = text.count(old)
    if count == 0:
        near = " (it does occur with different leading/trailing whitespace)" if old.strip() in text else ""
        raise NotFound(f"old_string was not found in {path!r}{near}. Read the file with read_file and copy "
                       "the exact text, including indentation and line breaks.")
    if count > 1 and not replace_all:
        raise InvalidInput(f"old_string occurs {count} times in {path!r}. Add surrounding lines to make it "
                           "unique, or set replace_all=true to replace all of them.")
    return count


def small_diff(before: str, after: str, name: str) -> str:
    """A unified diff limited to the changed region (common head/tail lines skipped), bounded."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    skip = max(0, head - 2)
    old_mid, new_mid = old[skip : len(old) - max(0, tail - 2)], new[skip : len(new) - max(0, tail - 2)]
    if len(old_mid) + len(new_mid) > MAX_DIFF_MIDDLE_LINES:
        return f"(diff omitted: the change spans {len(old_mid)} lines, from line {head + 1})"
    lines = list(difflib.unified_diff(old_mid, new_mid, f"a/{name}", f"b/{name}", n=2))
    lines = [_shift_hunk(line, skip) if line.startswith("@@") else line for line in lines]
    lines = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more diff lines)\n"]
    lines = [_clip_line(line) for line in lines]
    diff = "".join(lines)
    return diff if len(diff) <= MAX_DIFF_CHARS else diff[:MAX_DIFF_CHARS] + "\n... (diff shortened)\n"


def _clip_line(line: str) -> str:
    if len(line) <= MAX_DIFF_LINE_CHARS:
        return line
    return line[:MAX_DIFF_LINE_CHARS] + f"... ({len(line) - MAX_DIFF_LINE_CHARS} more characters)\n"


def _shift_hunk(header: str, offset: int) -> str:
    def shift(match: re.Match[str]) -> str:
        start = int(match.group(2))
        return f"{match.group(1)}{start + offset if start else start}"

    return re.sub(r"([-+])(\d+)", shift, header, count=2)
