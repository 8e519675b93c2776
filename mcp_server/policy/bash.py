"""Shell-command analyser (placeholder: asks for every command until the real lexer lands)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mcp_server.policy.model import Decision, ask
from mcp_server.policy.rules import Rules


@dataclass(frozen=True)
class Env:
    rules: Rules
    roots: tuple[str, ...]
    protected: tuple[str, ...]


@dataclass
class Segment:
    texts: tuple[str, ...]
    display: str
    safe: bool = False
    allowable: bool = False


@dataclass
class Report:
    command: str
    findings: list[Decision] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    def all_texts(self) -> list[str]:
        return [t for s in self.segments for t in s.texts]


def analyze(command: str, env: Env) -> Report:
    return Report(command, [ask("Shell analysis not available yet.", "high", "bash.unparsed")])
