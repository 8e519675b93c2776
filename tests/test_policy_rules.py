"""Loading the shipped defaults and the user's rules file; validation errors name file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from foundation.errors import SettingsError
from policy import PolicyContext, decide, load_rules, user_rules_file
from policy.rules import compile_glob, describe


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_load_and_have_the_safe_pieces() -> None:
    rules = load_rules(None)
    assert rules.sources == ()
    assert rules.shell.tools["run_bash_command"] == "command"
    assert {"write_file", "edit_file"} <= set(rules.write_tools)
    ids = {p.rule_id for p in rules.patterns}
    assert {"global.private_key", "global.api_key", "global.password", "global.drop_table"} <= ids
    view = describe(rules)
    assert view["shell"]["commands"]["ls"]["flags"] and view["secrets"]["deny"]


def test_user_file_extends_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, """
version = 1
[permissions]
allow = ["run_bash_command(npm test:*)"]
[shell]
safe_commands = ["make check"]
[secrets]
ask = ['(^|/)vault\\.json$', '(?i)(^|/)TOP-SECRET', '(?a)\\bkeyring$']
[files]
path_keys = ["location"]
[files.write_tools]
save_note = ["location"]
""")
    rules = load_rules(path)
    assert rules.sources == (path,)
    assert rules.permissions[-1].rule_id == "user.allow[0]"
    assert len(rules.shell.safe_commands) == len(load_rules(None).shell.safe_commands) + 1
    ctx = PolicyContext(rules=rules, roots=(tmp_path,), read_only=False)
    assert decide("run_bash_command", {"command": "make check"}, ctx).action == "allow"
    assert decide("read_file", {"path": "vault.json"}, ctx).rule_id == "files.secret_read"
    assert decide("read_file", {"path": "docs/top-secret.txt"}, ctx).rule_id == "files.secret_read"
    assert decide("read_file", {"path": "my/keyring"}, ctx).rule_id == "files.secret_read"
    assert decide("read_file", {"path": "docs/a.md"}, ctx).action == "ask"  # not read-only here
    assert decide("save_note", {"location": "/etc/x"}, ctx).rule_id == "files.write_outside_roots"


BAD_FILES = [
    ("[permissions\nallow = []", "invalid TOML", "line 1"),
    ("colour = 1", "key colour: unknown key", "line 1"),
    ("version = 2", "key version: unsupported version", "line 1"),
    ("\n\n[permissions]\nallow = ['run_bash_command(git status']", "key permissions.allow[0]: bad rule", "line 4"),
    ("[permissions]\ndeny = ['bad tool name(x)']", "key permissions.deny[0]: bad rule", "line 2"),
    ("[permissions]\nask = ['write_file()']", "empty argument glob", "line 2"),
    ("[permissions]\nallow = 'ls'", "key permissions.allow: must be a list", "line 2"),
    ("[permissions]\nallow = [1]", "key permissions.allow[0]: must be a non-empty string", "line 2"),
    ("[permissions]\nmaybe = []", "key permissions.maybe: unknown key", "line 2"),
    ("permissions = 3", "key permissions: must be a table", "line 1"),
    ("[[patterns]]\nid = 'x'\npattern = '('", "key patterns[0].pattern: invalid regular expression", "line 3"),
    ("[[patterns]]\nid = 'x'\npattern = 'a'\nrisk = 'extreme'", "key patterns[0].risk: must be one of", "line 4"),
    ("[[patterns]]\nid = 'x'\npattern = 'a'\naction = 'allow'", "key patterns[0].action: must be one of", "line 4"),
    ("[[patterns]]\nid = 'Bad Id'\npattern = 'a'", "key patterns[0].id", "line 2"),
    ("[[patterns]]\nid = 'private_key'\npattern = 'a'", "duplicate pattern id", "line 2"),
    ("[[patterns]]\nid = 'a'\npattern = 'a'\n[[patterns]]\nid = 'b'\npattern = ''", "key patterns[1].pattern", "line 6"),
    ("[[patterns]]\nid = 'x'\npattern = 'a'\ncolor = 1", "key patterns[0].color: unknown key", "line 4"),
    ("[tools.run_bash_command]\nhigh_risk = ['(unclosed']", "key tools.run_bash_command.high_risk[0]", "line 2"),
    ("[tools.run_bash_command]\nlow_risk = ['x']", "tools.run_bash_command.low_risk: unknown key", "line 2"),
    ("[shell]\ntools = { run_bash_command = 3 }", "key shell.tools.run_bash_command", "line 2"),
    ("[secrets]\nask = ['[']", "key secrets.ask[0]: invalid regular expression", "line 2"),
    ("[files.write_tools]\nsave = 'path'", "key files.write_tools.save: must be a list", "line 2"),
]


@pytest.mark.parametrize(("text", "message", "line"), BAD_FILES)
def test_validation_errors_name_file_line_and_key(text: str, message: str, line: str, tmp_path: Path) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as info:
        load_rules(path)
    error = str(info.value)
    assert str(path) in error and message in error and line in error, error
    assert "Approval rules" in error  # points at the README section


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_rules(tmp_path / "nope.toml")
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b"x = '\xff'")
    with pytest.raises(SettingsError, match="Cannot read"):
        load_rules(bad)


def test_user_rules_file_location(tmp_path: Path) -> None:
    assert user_rules_file(tmp_path, None) is None
    write(tmp_path, "")
    assert user_rules_file(tmp_path, None) == tmp_path / "policy.toml"
    explicit = tmp_path / "elsewhere.toml"
    assert user_rules_file(tmp_path, explicit) == explicit  # explicit wins, even when missing (load reports it)


def test_one_protected_paths_function_covers_rules_audit_and_approvals(tmp_path: Path) -> None:
    from foundation.settings import load_settings
    from mcp_server.approval.gate import protected_paths
    from policy.rules import default_rules_text

    path = write(tmp_path, "")
    settings = load_settings({"data_dir": tmp_path / "data", "policy_file": path}, environ={})
    protected = protected_paths(settings)
    assert path.resolve() in protected
    data = (tmp_path / "data").resolve()
    for name in ("policy.toml", "audit.jsonl", "approvals.sqlite3"):
        assert data / name in protected
    assert any(p.name == "default_rules.toml" for p in protected) and default_rules_text()


def test_slow_user_patterns_are_bounded_and_ask(tmp_path: Path) -> None:
    path = write(tmp_path, "[[patterns]]\nid = 'slow'\npattern = '(a+)+$'\naction = 'deny'\n")
    rules = load_rules(path)
    ctx = PolicyContext(rules=rules, roots=(tmp_path,), read_only=True)
    decision = decide("search", {"query": "a" * 5000 + "!"}, ctx)
    assert (decision.action, decision.rule_id) == ("ask", "global.slow")
    assert decide("search", {"query": "aaa"}, ctx).action == "deny"


GLOBS = [
    ("git status*", "git status", True),
    ("git status*", "git status -s", True),
    ("git status*", "git statusx", True),
    ("git status:*", "git statusx", False),
    ("git status:*", "git status", True),
    ("git status:*", "git status --short", True),
    ("npm run test:*", "npm run test:unit", False),
    ("*.md", "docs/a.md", True),
    ("docs/?.md", "docs/a.md", True),
    ("[ab].txt", "a.txt", True),
    ("[!ab].txt", "a.txt", False),
    ("make (all)", "make (all)", True),
]


@pytest.mark.parametrize(("glob", "text", "matches"), GLOBS)
def test_argument_globs(glob: str, text: str, matches: bool) -> None:
    assert bool(compile_glob(glob).fullmatch(text)) is matches


def test_readme_example_loads(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Approval rules", 1)[1]
    example = section.split("```toml\n", 1)[1].split("```", 1)[0]
    rules = load_rules(write(tmp_path, example))
    ctx = PolicyContext(rules=rules, roots=(tmp_path,), read_only=False)
    assert decide("run_bash_command", {"command": "git push"}, ctx).rule_id == "user.deny[0]"
    assert decide("run_bash_command", {"command": "npm test"}, ctx).action == "allow"
    assert decide("write_file", {"path": "a", "content": "password=hunter22"}, ctx).rule_id == "default.ask"


def test_a_user_file_never_changes_the_defaults_of_later_loads(tmp_path: Path) -> None:
    """The shipped rules are parsed and compiled once per process (cached): a user file that extends a shipped
    command or pattern list must leave the next load without it."""
    before = load_rules(None)
    extended = load_rules(write(tmp_path, '[shell.commands.ls]\nflags = "--zz-flag"\nrisky = { "--zz-risky" = "test" }\n'
                                          '[secrets]\ndeny = ["(^|/)extra-secret$"]\n'))
    assert "--zz-flag" in extended.shell.commands["ls"].flags and "--zz-risky" in extended.shell.commands["ls"].risky
    after = load_rules(None)
    for rules in (before, after):
        assert "--zz-flag" not in rules.shell.commands["ls"].flags and "--zz-risky" not in rules.shell.commands["ls"].risky
        assert "(^|/)extra-secret$" not in rules.secret_deny.sources
    assert after.shell.commands == before.shell.commands and after.secret_deny.sources == before.secret_deny.sources
