"""The shell checker's entry point: `analyze(command, env)` runs lex -> parse -> analyse for one
command line, with the handler tables of shell_commands (destructive commands, writers, git, cd),
shell_exec (privilege, shells, interpreters, wrappers), shell_network (uploads, reverse shells) and
shell_system (kill-all, privileged containers) merged once here."""

from __future__ import annotations

from foundation.bounding import MAX_COMMAND_CHARS
from policy.model import ask
from policy.shell_commands import HANDLERS as COMMAND_HANDLERS
from policy.shell_exec import HANDLERS as EXEC_HANDLERS
from policy.shell_network import HANDLERS as NETWORK_HANDLERS
from policy.shell_scan import Env, Report, Scanner, Segment
from policy.shell_system import HANDLERS as SYSTEM_HANDLERS

HANDLERS = COMMAND_HANDLERS.merged(EXEC_HANDLERS).merged(NETWORK_HANDLERS).merged(SYSTEM_HANDLERS)


def analyze(command: str, env: Env) -> Report:
    """Findings and segments of one command line. Never raises (the engine wraps it anyway)."""
    scanner = Scanner(command, env, HANDLERS)
    if len(command) > MAX_COMMAND_CHARS:
        scanner.find(ask(f"The command is longer than {MAX_COMMAND_CHARS} characters; write a script file "
                         "and run that instead.", "high", "bash.too_long"))
        scanner.unsafe_segment(command)
        return scanner.report
    scanner.source(command, 0)
    return scanner.report


__all__ = ["Env", "Report", "Segment", "analyze"]
