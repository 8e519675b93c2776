"""Option allow-lists: the red-team reproducers (issue 14) and property tests over option spellings.

For every allow-listed command, random spellings of its known-risky options and of unknown options
(GNU abbreviations, attached values, `=` forms, bundles, anywhere before `--`) never give "allow";
random command lines never crash the analyser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import Decision, PolicyContext, decide, load_rules
from policy.shell_exec import WRAPPER_OPTIONS
from policy.shell_options import CommandSpec, check, resolve_long

RULES = load_rules(None)
SPECS = RULES.shell.commands
ROOT = Path("/srv/ws")
CTX = PolicyContext(rules=RULES, roots=(ROOT,), read_only=False, protected_paths=(ROOT / "policy.toml",))
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def bash(command: str, ctx: PolicyContext = CTX) -> Decision:
    return decide("run_bash_command", {"command": command}, ctx)


# -- the reproducers (each was allowed before the allow-lists) -------------------------------------

REPRODUCERS = [
    ("sort --compr=sh -S 1 f f", "ask", "--compress-program"),  # code execution
    ("sort --outp=important.py x", "ask", "--output"),  # writes
    ("sort --o=.git/hooks/x payload", "ask", "--output"),
    ("sort --o=.bashrc payload", "ask", "--output"),
    ("file -f/etc/hostname", "ask", "names are not checked"),  # reads outside the roots (and the names in it)
    ("file -m/etc/magic notes.txt", "ask", "outside the workspace roots"),
    ("du -X/etc/hostname .", "ask", "outside the workspace roots"),
    ("git ls-files -X/etc/hostname", "ask", "outside the workspace roots"),
    ("file -f/proc/1/environ", "deny", "secret store"),
    ("cat /proc/self/environ", "deny", "secret store"),
    # round 3: a list of file names read from a file or stdin (the names inside were never checked)
    ("printf '.env\\0' | sort --files0-from=-", "ask", "names are not checked"),  # printed the .env
    ("printf '/etc/hostname\\0' | wc --files0-from=-", "ask", "names are not checked"),
    ("du --files0=names.txt", "ask", "names are not checked"),
    ("file -f list.txt", "ask", "names are not checked"),
    ("sha256sum -c SHA256SUMS", "ask", "names are not checked"),
    ("md5sum --check sums.md5", "ask", "names are not checked"),
    ("sort --files0-from=/proc/1/environ", "deny", "secret store"),  # the list's own path is still checked
    # round 3: a wrapper's own options (time wrote any text anywhere in the roots: .git/config, then git ran it)
    ("\\time -a -o.git/config -f '[core]\\n\\tfsmonitor = sh' true", "ask", "can make later commands run code"),
    ("/usr/bin/time --output=notes.txt ls", "ask", "writes notes.txt"),
    ("nice time --o=/etc/x ls", "deny", "outside the workspace roots"),
    ("timeout --unknown 5 ls", "ask", "not on the allow-list"),
    ("ionice -p 1 ls", "ask", "changes other processes"),
    # round 3: a program named like a safe one plus digits got that one's allow-list (diff3 -x FILE read FILE)
    ("diff3 -x /etc/hostname a b", "ask", "diff3 is not on the allow-list"),
    ("sort2 notes.txt", "ask", "sort2 is not on the allow-list"),
    ("git --help log", "ask", "opens the manual"),  # man, or help.browser from the repository's config
]


@pytest.mark.parametrize(("command", "action", "why"), REPRODUCERS)
def test_red_team_reproducers_no_longer_pass(command: str, action: str, why: str) -> None:
    decision = bash(command)
    assert decision.action == action, decision
    assert why in decision.reason, decision


@pytest.mark.parametrize("command", ["sort -k2 -n notes.txt", "sort --rev notes.txt", "file -m magic notes.txt",
                                     "du -X exclude.txt -sh .", "git ls-files -X .gitignore", "head -n5 a",
                                     "ls -lah --color=auto", "git log --oneline -n 3 --", "tail -n +2 a.csv",
                                     "python3.11 --version", "node18 -v", "time -p git status", "timeout -s KILL 5 ls",
                                     "nice -n 5 ls", "stdbuf -oL ls", "sha256sum notes.txt"])
def test_the_same_options_inside_the_roots_are_allowed(command: str) -> None:
    assert bash(command).action == "allow", bash(command)


def test_getopt_reading() -> None:
    sort = SPECS["sort"]
    assert resolve_long(sort, "--compr") == "--compress-program"
    assert resolve_long(sort, "--rev") == "--reverse"
    assert resolve_long(sort, "--s") is None  # ambiguous: --sort, --stable
    parsed = check("file", ["-bm/abs/magic", "x"], SPECS)
    assert parsed.ok and parsed.paths == ["/abs/magic"] and parsed.operands == ["x"]
    listed = check("file", ["-bf/abs/list", "x"], SPECS)  # a risky option with a value: read, then refused
    assert not listed.ok and listed.paths == ["/abs/list"]
    assert check("sort", ["--", "--output=x"], SPECS).operands == ["--output=x"]  # after --: a file name
    assert not check("git", ["-C", "/", "status"], SPECS).ok
    assert check("git", ["--no-pager", "log", "-3"], SPECS).ok
    assert not check("git", ["stash", "drop"], SPECS).ok


# -- properties -------------------------------------------------------------------------------


def _specs_with_risky() -> list[tuple[str, CommandSpec, str]]:
    return [(name, spec, opt) for name, spec in sorted(SPECS.items()) for opt in sorted(spec.risky)]


RISKY = _specs_with_risky()


@st.composite
def risky_spelling(draw: st.DrawFn) -> tuple[str, str]:
    """A command line using a risky option of an allow-listed command, spelled any way the command accepts."""
    name, spec, opt = draw(st.sampled_from(RISKY))
    value = draw(st.sampled_from(["x", "sh", "/tmp/out", ".git/hooks/pre-commit", "-", "1"]))
    if spec.style == "find":
        spelled = [opt, value] if opt not in ("-delete",) else [opt]
        if opt.startswith(("-exec", "-ok")):
            spelled = [opt, "rm", "{}", ";"]
        before = draw(st.sampled_from([[], ["-name", "'*.py'"], ["-type", "f", "-o"]]))
        return name, " ".join([name, ".", *before, *spelled])
    if opt.startswith("--"):
        cut = draw(st.integers(min_value=3, max_value=len(opt)))
        if opt[:cut] != opt and opt[:cut] in spec.known() - frozenset(spec.risky):
            cut = len(opt)  # the prefix is itself an allowed option: the program reads it as that one
        form = draw(st.sampled_from(["=", " ", ""]))
        spelled = opt[:cut] + (f"={value}" if form == "=" else f" {value}" if form == " " else "")
    else:
        shorts = sorted(f[1] for f in spec.flags if len(f) == 2 and f[1].isalpha())
        bundle = "".join(draw(st.lists(st.sampled_from(shorts), max_size=3))) if shorts else ""
        attached = draw(st.booleans())
        spelled = f"-{bundle}{opt[1]}" + (value if attached else f" {value}")
    safe = sorted(f for f in spec.flags if f.startswith("-") and len(f) > 1)
    before = draw(st.lists(st.sampled_from(safe), max_size=2)) if safe else []
    after = draw(st.lists(st.sampled_from(safe), max_size=2)) if safe else []
    tail = draw(st.sampled_from(["", " notes.txt", " -- notes.txt", " notes.txt --"]))
    return name, " ".join([name, *before, spelled, *after]) + tail


@PROPERTY
@given(risky_spelling())
def test_risky_options_are_never_allowed_however_spelled(case: tuple[str, str]) -> None:
    name, command = case
    decision = bash(command)
    assert decision.action != "allow", (command, decision)


UNKNOWN_LONG = st.from_regex(r"--[a-z][a-z-]{1,14}", fullmatch=True)
UNKNOWN_SHORT = st.sampled_from([chr(c) for c in range(ord("A"), ord("z") + 1) if chr(c).isalpha()])


@PROPERTY
@given(name=st.sampled_from(sorted(n for n, s in SPECS.items() if s.style == "getopt")), long=UNKNOWN_LONG,
       short=UNKNOWN_SHORT, use_long=st.booleans(), attached=st.sampled_from(["", "=v", "v"]))
def test_options_off_the_list_are_never_allowed(name: str, long: str, short: str, use_long: bool,
                                                attached: str) -> None:
    spec = SPECS[name]
    if use_long:
        word = long + ("=v" if attached == "=v" else "")
        full = resolve_long(spec, long)
        known_ok = full is not None and full not in spec.risky
    else:
        word = f"-{short}{attached if attached == 'v' else ''}"
        known_ok = f"-{short}" in spec.flags | spec.values | spec.paths | spec.optional
    if known_ok or spec.subcommands:
        return
    decision = bash(f"{name} {word} notes.txt")
    assert decision.action != "allow", (name, word, decision)


@PROPERTY
@given(name=st.sampled_from(sorted(n for n, s in SPECS.items() if s.paths and s.style == "getopt")),
       outside=st.sampled_from(["/etc/hostname", "../x", "/proc/1/environ", "~/.bashrc", "/srv/ws_evil/x"]),
       attached=st.booleans(), data=st.data())
def test_path_option_values_outside_the_roots_are_never_allowed(name: str, outside: str, attached: bool,
                                                                data: st.DataObject) -> None:
    opt = data.draw(st.sampled_from(sorted(SPECS[name].paths)))
    spelled = (f"{opt}={outside}" if opt.startswith("--") else f"{opt}{outside}") if attached else f"{opt} {outside}"
    decision = bash(f"{name} {spelled} notes.txt")
    assert decision.action != "allow", (name, spelled, decision)


TRANSPARENT_WRAPPERS = sorted(WRAPPER_OPTIONS)


@PROPERTY
@given(wrapper=st.sampled_from(TRANSPARENT_WRAPPERS), long=UNKNOWN_LONG, short=UNKNOWN_SHORT,
       use_long=st.booleans(), attached=st.sampled_from(["", "=v", "v"]), inner=st.sampled_from(["ls", "git status"]))
def test_wrapper_options_off_their_list_are_never_allowed(wrapper: str, long: str, short: str, use_long: bool,
                                                          attached: str, inner: str) -> None:
    """The wrappers' own options are read like the safe commands' (`time --output=f` wrote f, round 3)."""
    spec = WRAPPER_OPTIONS[wrapper]
    if use_long:
        word = long + ("=v" if attached == "=v" else "")
        full = resolve_long(spec, long)
        known_ok = full is not None and full not in spec.risky and full not in spec.paths
    else:
        word = f"-{short}{attached if attached == 'v' else ''}"
        known_ok = f"-{short}" in spec.flags | spec.values
    if known_ok:
        return
    duration = " 5" if wrapper == "timeout" else ""
    decision = bash(f"{wrapper} {word}{duration} {inner}")
    assert decision.action != "allow", (wrapper, word, decision)


@PROPERTY
@given(prefix=st.sampled_from(["", "nice ", "timeout 5 ", "env ", "command ", "\\", "/usr/bin/"]),
       spelled=st.sampled_from(["-o {}", "-o{}", "--output={}", "--output {}", "--o={}", "--outp {}", "-ao {}",
                                "-ao{}", "-pqo {}", "-f %e -o {}"]),
       target=st.sampled_from(["notes.txt", ".git/config", ".bashrc", "/etc/x", "../x", "/srv/ws/src/a.py"]))
def test_time_writing_its_report_is_never_allowed(prefix: str, spelled: str, target: str) -> None:
    decision = bash(f"{prefix}time {spelled.format(target)} true")
    assert decision.action != "allow", decision
    if not target.startswith(("/srv/ws/", "notes", ".")):
        assert decision.action == "deny", decision


SHELL_ALPHABET = st.sampled_from(list("abcrmsfo -=/.'\"$`();|&<>{}*?[]~\\\n#!") + ["rm", "sort", "--o", "-f", "$(", "ls",
                                                                                       "git", "<<EOF", "EOF"])


@settings(max_examples=600, deadline=None)
@given(st.lists(SHELL_ALPHABET, max_size=120).map("".join))
def test_random_command_lines_never_crash_the_analyser(command: str) -> None:
    decision = bash(command)
    assert decision.action in ("allow", "ask", "deny")
    assert decision.rule_id != "engine.error", (command, decision)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_random_text_never_crashes_the_analyser(command: str) -> None:
    assert bash(command).rule_id != "engine.error"


@pytest.mark.parametrize("command", ["tree -Lo 1 conftest.py .", "tree -dLo 1 Makefile .", "tree -Po x .bashrc .",
                                     "tree -o conftest.py .", "rg -f=/etc/hostname x notes.txt"])
def test_tree_and_rg_read_as_they_read_themselves(command: str) -> None:
    """Issue 30, finding 1: tree gives each bundled value option the next word (`-Lo 1 FILE` is -L 1 -o FILE);
    ripgrep drops the `=` of an attached short value (`-f=/etc/x` reads /etc/x)."""
    assert bash(command).action != "allow", command


@pytest.mark.anyio
async def test_tree_cannot_write_a_workspace_file_unasked_through_the_client(make_settings: Any,
                                                                             workspace: Path) -> None:
    """End to end: before, `tree -Lo 1 conftest.py .` ran unasked and wrote conftest.py (then run by pytest)."""
    from tests.conftest import connect

    async with connect(make_settings(bash_enabled=True)) as client:
        result = await client.call_tool("run_bash_command", {"command": "tree -Lo 1 conftest.py ."})
        text = " ".join(getattr(c, "text", "") for c in result.content)
        assert "Approval required" in text and "writes the listing to a file" in text, text
        fine = await client.call_tool("run_bash_command", {"command": "tree -L 1 ."})
        assert not fine.is_error or "tree: command not found" in str(fine.content)
    assert not (workspace / "conftest.py").exists()
