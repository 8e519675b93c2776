"""The command corpus (tests/data/policy_corpus.toml): dangerous commands are denied (>= 90%) and
never allowed, risky ones never allowed, and at most 5 of 56 everyday commands prompt.
Run with `-s` to see the counts per category (allowed / asked / denied)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from policy import Decision, PolicyContext, decide, load_rules

CORPUS = tomllib.loads((Path(__file__).parent / "data" / "policy_corpus.toml").read_text(encoding="utf-8"))
RULES = load_rules(None)


def classify(workspace: Path, sandboxed: bool = True) -> dict[str, dict[str, list[tuple[str, Decision]]]]:
    root = workspace.resolve()
    ctx = PolicyContext(rules=RULES, roots=(root,), read_only=False, protected_paths=(root / "policy.toml",),
                        sandboxed=sandboxed)
    out: dict[str, dict[str, list[tuple[str, Decision]]]] = {}
    for expected, categories in CORPUS.items():
        for category, table in categories.items():
            out[f"{expected}.{category}"] = {"allow": [], "ask": [], "deny": []}
            for command in table["commands"]:
                decision = decide("run_bash_command", {"command": command}, ctx)
                out[f"{expected}.{category}"][decision.action].append((command, decision))
    return out


def table(results: dict[str, dict[str, list[tuple[str, Decision]]]]) -> str:
    lines = [f"{'category':28} {'n':>4} {'allowed':>8} {'asked':>6} {'denied':>7}"]
    for name, found in results.items():
        n = sum(len(v) for v in found.values())
        lines.append(f"{name:28} {n:4} {len(found['allow']):8} {len(found['ask']):6} {len(found['deny']):7}")
    return "\n".join(lines)


def test_corpus_counts(workspace: Path) -> None:
    results = classify(workspace)
    print("\n" + table(results))
    deny_groups = [v for k, v in results.items() if k.startswith("deny.")]
    denied = sum(len(v["deny"]) for v in deny_groups)
    total = sum(len(c) for v in deny_groups for c in v.values())
    dangerous_allowed = [c for k, v in results.items() if not k.startswith("allow.") for c, _ in v["allow"]]
    everyday = results["allow.everyday"]
    prompted = [(c, d.rule_id) for c, d in everyday["ask"] + everyday["deny"]]
    print(f"should-deny denied: {denied}/{total}; dangerous allowed: {len(dangerous_allowed)}; "
          f"everyday prompted: {len(prompted)}/56 {prompted}")
    assert sum(len(v) for v in everyday.values()) == 56
    assert dangerous_allowed == []
    assert denied >= 0.9 * total, [c for v in deny_groups for c, _ in v["ask"]]
    assert len(prompted) <= 5, prompted


@pytest.mark.parametrize("category", [k for k in CORPUS["deny"]])
def test_every_deny_category_is_mostly_denied(category: str, workspace: Path) -> None:
    found = classify(workspace)[f"deny.{category}"]
    n = sum(len(v) for v in found.values())
    assert not found["allow"]
    assert len(found["deny"]) >= 0.8 * n, [(c, d.rule_id) for c, d in found["ask"]]


def test_without_a_sandbox_no_shell_command_is_allowed_and_denies_stay(workspace: Path) -> None:
    sandboxed, bare = classify(workspace), classify(workspace, sandboxed=False)
    for name in bare:
        assert bare[name]["allow"] == [], name
        assert [c for c, _ in bare[name]["deny"]] == [c for c, _ in sandboxed[name]["deny"]], name
    asked = {d.rule_id for _, d in bare["allow.everyday"]["ask"]}
    assert "shell.unsandboxed" in asked
