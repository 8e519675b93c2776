"""The option allow-lists checked against the real programs, not against our model of their parsers.

For every allow-listed command installed here, command lines are generated from its allow-list
(bundles of short options with values after them, `--opt=value`, `--opt value`, abbreviations of long
options, attached values, `--`) and decided by the policy; each one the policy ALLOWS is run, the real
binary in bubblewrap on a scratch root (writable, to see what it would write), with a folder outside
the root holding a secret, a named pipe and an executable (one sandbox runs a module's command lines
one after another: tests/sandboxed_runner.py). The test fails when an allowed command line
changed a file in the root, ran the outside program, opened the outside pipe (any read of an outside file,
seen even when nothing is printed) or printed the outside secret (issue 30, finding 1: the policy read
`tree -Lo 1 FILE` as `-L o`, tree as `-L 1 -o FILE`, and wrote FILE; `rg -f=/x` reads /x)."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy import PolicyContext, decide, load_rules
from policy.shell_options import CommandSpec

RULES = load_rules(None)
SPECS = RULES.shell.commands
SECRET = "SECRET-7f3a-OUTSIDE-CONTENT"
NOT_RUN = {"[", "test", "echo", "true", "false", "printf", "python", "python3", "node", "pwd", "whoami", "uname"}
"""Commands whose lists hold no option with a value and read no file: nothing to compare."""


def _program(name: str) -> str | None:
    return shutil.which(name.split()[0])


COMMANDS = sorted(n for n, s in SPECS.items() if n not in NOT_RUN and not s.subcommands and _program(n))
BWRAP = shutil.which("bwrap")
RUNNER = Path(__file__).with_name("sandboxed_runner.py")
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is needed to run the real programs safely")


@dataclass(frozen=True)
class Scene:
    root: Path
    outside: Path
    marks: Path

    @property
    def secret(self) -> str:
        return str(self.outside / "secret.txt")

    @property
    def program(self) -> str:
        return str(self.outside / "run.sh")

    @property
    def pipe(self) -> str:
        return str(self.outside / "pipe")


def _scene(base: Path) -> Scene:
    root, outside, marks = base / "ws", base / "outside", base / "marks"
    for folder in (root / "sub", outside, marks):
        folder.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("alpha\nbeta\n2024-01-02\n")
    (root / "sub" / "b.txt").write_text("gamma\n")
    (outside / "secret.txt").write_text(SECRET + "\n")
    run = outside / "run.sh"
    run.write_text(f"#!/bin/sh\necho ran > {marks}/ran\n")
    run.chmod(0o755)
    if not (outside / "pipe").exists():
        os.mkfifo(outside / "pipe")
    if not (root / ".git").exists():
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(base)}
        for args in (["init", "-q"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"]):
            subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return Scene(root, outside, marks)


class Runner:
    """One bubblewrap sandbox for a module's command lines (tests/sandboxed_runner.py): the root and the
    marks folder writable, everything else read-only, no network, no capabilities."""

    def __init__(self, scene: Scene) -> None:
        assert BWRAP is not None
        wrapped = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--bind", str(scene.root),
                   str(scene.root), "--bind", str(scene.marks), str(scene.marks), "--unshare-all", "--cap-drop",
                   "ALL", "--die-with-parent", "--chdir", str(scene.root), "--", sys.executable, "-I", str(RUNNER),
                   str(scene.root), scene.pipe, SECRET]
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": str(scene.root), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_PAGER": "cat", "PAGER": "cat"}
        self.process = subprocess.Popen(wrapped, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.fresh = False  # the root was changed from outside since the last command

    def run(self, argv: list[str]) -> dict[str, Any]:
        """What argv printed, whether it opened the outside pipe, and the root's snapshots around it."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"argv": argv, "fresh": self.fresh}) + "\n")
        self.fresh = False
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the sandboxed runner ended (exit {self.process.poll()})"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return _scene(tmp_path_factory.mktemp("real"))


@pytest.fixture(scope="module")
def runner(scene: Scene) -> Iterator[Runner]:
    sandbox = Runner(scene)
    yield sandbox
    sandbox.close()


def harm(scene: Scene, runner: Runner, argv: list[str]) -> str | None:
    """What the real program did that an allowed command must never do, or None."""
    answer = runner.run(argv)
    before, after = answer["before"], answer["after"]
    ran = list(scene.marks.iterdir())
    for mark in ran:
        mark.unlink()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if changed:
        _restore(scene, before, after)
        runner.fresh = True
    if changed:
        return f"changed {changed}"
    if ran:
        return "ran the outside program"
    if answer["opened"]:
        return "opened the outside pipe (read a file outside the root) or hung on it"
    if SECRET in answer["printed"]:
        return "printed the outside secret"
    return None


def _restore(scene: Scene, before: dict[str, str], after: dict[str, str]) -> None:
    for rel in sorted(after.keys() - before.keys(), reverse=True):
        path = scene.root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if any(before.get(k) != after.get(k) for k in before):  # a changed file: rebuild the scene's files
        for path in scene.root.iterdir():  # the root itself stays: the sandbox has it mounted
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
        _scene(scene.root.parent)


def allowed(scene: Scene, argv: list[str]) -> bool:
    ctx = PolicyContext(rules=RULES, roots=(scene.root,), read_only=False)
    return decide("run_bash_command", {"command": shlex.join(argv)}, ctx).action == "allow"


def _value_options(spec: CommandSpec) -> list[str]:
    """Short options that take a value, or that are known to be risky (whatever they take)."""
    return sorted(o for o in spec.values | spec.paths | frozenset(spec.risky) if len(o) == 2 and o[1] != "-")


def _values(scene: Scene) -> list[str]:
    return ["1", "OUT", scene.secret, scene.program, scene.pipe, "a.txt", "-"]


def _check(scene: Scene, runner: Runner, argv: list[str]) -> None:
    if allowed(scene, argv):
        found = harm(scene, runner, argv)
        assert found is None, f"the policy allows `{shlex.join(argv)}`, and the real program {found}"


def test_the_sandbox_sees_each_harm_and_starts_clean_after_one(scene: Scene, runner: Runner) -> None:
    """The harness itself: each kind of harm is seen (not through the policy), and a changed root is
    rebuilt, so that the next command line is judged on the scene as made."""
    assert harm(scene, runner, ["grep", "-r", "alpha", "."]) is None
    assert (harm(scene, runner, ["sort", "-o", "OUT", "a.txt"]) or "").startswith("changed ['OUT']")
    assert (harm(scene, runner, ["cp", "sub/b.txt", "a.txt"]) or "").startswith("changed ['a.txt']")
    assert (scene.root / "a.txt").read_text().startswith("alpha") and not (scene.root / "OUT").exists()
    assert harm(scene, runner, ["grep", "-r", "alpha", "."]) is None
    assert harm(scene, runner, ["find", ".", "-name", "a.txt", "-exec", scene.program, ";"]) == "ran the outside program"
    assert (harm(scene, runner, ["cat", scene.pipe]) or "").startswith("opened the outside pipe")
    assert harm(scene, runner, ["cat", scene.secret]) == "printed the outside secret"
    assert harm(scene, runner, ["cat", "a.txt"]) is None


# -- systematic: every pair of value-taking short options bundled, with values after ------------------


@pytest.mark.parametrize("name", COMMANDS)
def test_bundled_value_options_are_read_as_the_real_program_reads_them(scene: Scene, runner: Runner, name: str) -> None:
    spec = SPECS[name]
    if spec.style == "find":
        pytest.skip("find's predicates are whole words (generated in the property test)")
    shorts = _value_options(spec)
    flags = sorted(f for f in spec.flags if len(f) == 2 and f[1] != "-")[:3]
    bundles = [a + b[1] for a, b in itertools.permutations(shorts, 2)]
    bundles += [f + v[1] for f in flags for v in shorts] + [v + f[1] for f in flags for v in shorts]
    values = _values(scene)
    for bundle in bundles:
        for first, second in [("1", "OUT"), ("OUT", "1"), (scene.program, scene.pipe), ("a.txt", "OUT")]:
            _check(scene, runner, [*name.split(), bundle, first, second, "."])
        _check(scene, runner, [*name.split(), bundle + "OUT", "a.txt"])
    for opt in shorts:
        for value in values:
            _check(scene, runner, [*name.split(), opt + value, "a.txt"])
            _check(scene, runner, [*name.split(), opt + "=" + value, "a.txt"])


# -- generated: random spellings from the allow-list --------------------------------------------------


@st.composite
def spelling(draw: st.DrawFn, spec: CommandSpec, scene: Scene) -> list[str]:
    values = _values(scene)
    longs = sorted(o for o in spec.known() if o.startswith("--"))
    shorts = sorted(o for o in spec.known() if len(o) == 2 and o[0] == "-" and o[1] != "-")
    words: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["long", "long=", "abbrev", "bundle", "attached", "value", "operand", "--"]))
        if kind in ("long", "long=", "abbrev") and longs:
            opt = draw(st.sampled_from(longs))
            if kind == "abbrev":
                opt = opt[: draw(st.integers(3, len(opt)))]
            words.append(opt + ("=" + draw(st.sampled_from(values)) if kind == "long=" else ""))
        elif kind in ("bundle", "attached") and shorts:
            letters = draw(st.lists(st.sampled_from(shorts), min_size=1, max_size=3))
            word = "-" + "".join(o[1] for o in letters)
            words.append(word + (draw(st.sampled_from(values)) if kind == "attached" else ""))
        elif kind == "--":
            words.append("--")
        else:
            words.append(draw(st.sampled_from(values if kind == "value" else ["a.txt", ".", "sub"])))
    return words


def _find_spelling(spec: CommandSpec, scene: Scene) -> st.SearchStrategy[list[str]]:
    predicates = sorted(spec.known() - {"(", ")", "!", ","})
    item = st.tuples(st.sampled_from(predicates), st.sampled_from([*_values(scene), "{}", ";"]))
    return st.lists(item, min_size=1, max_size=3).map(lambda items: [".", *itertools.chain(*items)])


@pytest.mark.parametrize("name", COMMANDS)
def test_generated_option_spellings_allowed_by_the_policy_are_harmless(scene: Scene, runner: Runner,
                                                                       name: str) -> None:
    spec = SPECS[name]
    strategy = _find_spelling(spec, scene) if spec.style == "find" else spelling(spec, scene)

    @settings(max_examples=int(os.environ.get("GENERALAGENT_REAL_EXAMPLES", "40")), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def run(words: list[str]) -> None:
        _check(scene, runner, [*name.split(), *words])

    run()
