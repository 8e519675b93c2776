"""Commands printed for people run as printed in their shell (issue 35): POSIX sh (run through a real sh),
cmd.exe and PowerShell (through models of their rules: no Windows here). Property: any words, quoted for a
shell, come back as the same argument list after that shell's parsing (and, on Windows, the program's C
runtime's)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from foundation.command import cli_command
from foundation.script import command_line, default_shell, quote_for, script_name

ECHO_ARGV = "import sys, json; sys.stdout.write(json.dumps(sys.argv[1:]))"
TRICKY = list(" \t\\\"'%^&|<>()$`@{},;!*?~#=:/.-\u2018\u2019\u201c\u201d") + ["ab", "C:\\", "%PATH%", "数据"]
WORD = st.lists(st.sampled_from(TRICKY) | st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                max_size=12).map("".join)
WORDS = st.lists(WORD, min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(words=WORDS)
def test_posix_words_round_trip_through_a_real_sh(words: list[str]) -> None:
    line = command_line([sys.executable, "-c", ECHO_ARGV, *words], "posix")
    done = subprocess.run(["/bin/sh", "-c", line], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == words


def cmd_exe(line: str) -> str:
    """What cmd.exe hands the program: `^` escapes outside quotes (and is removed); a `"` toggles quoting
    unless escaped. Fails on anything cmd would act on: an unescaped & | < > ( ) or any %, inside quotes or not."""
    out, quoted, i = [], False, 0
    while i < len(line):
        c = line[i]
        assert c != "%" or (not quoted and out and line[i - 1] == "^"), f"cmd expands % in {line!r}"
        if not quoted and c == "^":
            out.append(line[i + 1])
            i += 2
            continue
        assert quoted or c not in "&|<>()", f"unescaped {c!r} in {line!r}"
        if c == '"':
            quoted = not quoted
        out.append(c)
        i += 1
    assert not quoted
    return "".join(out)


def crt_argv(line: str) -> list[str]:
    """The arguments the Microsoft C runtime (2008+) makes of a command line (after the program name)."""
    args: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i >= n:
            return args
        arg, quoted = [], False
        while i < n and (quoted or line[i] not in " \t"):
            if line[i] == "\\":
                j = i
                while j < n and line[j] == "\\":
                    j += 1
                if j < n and line[j] == '"':
                    arg.append("\\" * ((j - i) // 2))
                    if (j - i) % 2:
                        arg.append('"')
                        j += 1
                else:
                    arg.append("\\" * (j - i))
                i = j
            elif line[i] == '"':
                if quoted and i + 1 < n and line[i + 1] == '"':
                    arg.append('"')
                    i += 2
                else:
                    quoted = not quoted
                    i += 1
            else:
                arg.append(line[i])
                i += 1
        args.append("".join(arg))


PS_SINGLE = "'\u2018\u2019\u201a\u201b"


def powershell_argv(line: str) -> list[str]:
    """PowerShell's arguments of a native command: bare words (only plain characters) and single-quoted
    strings (a doubled quote is one; the typographic single quotes count as quotes)."""
    line = line.removeprefix("& ")
    args, i = [], 0
    while i < len(line):
        if line[i] == " ":
            i += 1
        elif line[i] in PS_SINGLE:
            buf, j = [], i + 1
            while not (line[j] in PS_SINGLE and (j + 1 >= len(line) or line[j + 1] not in PS_SINGLE)):
                buf.append(line[j])
                j += 2 if line[j] in PS_SINGLE else 1
            args.append("".join(buf))
            i = j + 1
            assert i >= len(line) or line[i] == " "
        else:
            j = line.find(" ", i) % (len(line) + 1) if " " in line[i:] else len(line)
            assert re.fullmatch(r"[A-Za-z0-9_+=:./\\-]+", line[i:j]), line[i:j]
            args.append(line[i:j])
            i = j
    return args


NO_BREAKS = st.lists(WORD.map(lambda w: w.replace("\t", " ")), min_size=1, max_size=5)


@settings(max_examples=400, deadline=None)
@given(words=NO_BREAKS)
def test_cmd_words_round_trip_through_cmd_and_the_c_runtime(words: list[str]) -> None:
    line = command_line(["prog", *words], "cmd")
    assert crt_argv(cmd_exe(line)) == ["prog", *words]


@settings(max_examples=400, deadline=None)
@given(words=NO_BREAKS.map(lambda ws: [w.replace('"', "") for w in ws]))
def test_powershell_words_round_trip(words: list[str]) -> None:
    """(A `"` inside an argument is left out: Windows PowerShell 5.1 passes it to a program unescaped; no path or
    id we print holds one.)"""
    line = command_line(["C:\\Program Files\\ga\\generalagent-mcp.exe", *words], "powershell")
    assert line.startswith("& 'C:\\Program Files\\ga\\generalagent-mcp.exe'")
    assert powershell_argv(line) == ["C:\\Program Files\\ga\\generalagent-mcp.exe", *words]


def test_windows_gets_powershell_and_the_exe(make_settings: object) -> None:
    assert default_shell("nt") == "powershell" and script_name("nt") == "generalagent-mcp.exe"
    assert default_shell("posix") == "posix" and script_name("posix") == "generalagent-mcp"
    assert quote_for("--data-dir", "powershell") == "--data-dir" and quote_for("it's", "cmd") == "\"it's\""
    settings_ = make_settings(data_dir="/tmp/my data")  # type: ignore[operator]
    for shell, parse in [("cmd", lambda s: crt_argv(cmd_exe(s))), ("powershell", powershell_argv)]:
        line = cli_command(settings_, "approve", "a1b2", shell=shell)  # type: ignore[arg-type]
        assert parse(line)[-4:] == ["--data-dir", "/tmp/my data", "approve", "a1b2"], line
