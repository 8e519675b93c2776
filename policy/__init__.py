"""Approval policy: rules as data plus one pure decision function.

`decide(tool, args, context)` is applied at the dispatch point for every call (client or
sub-agent); it never raises and never does I/O. `load_rules(user_file)` reads the shipped
defaults plus the user's rules file once at start-up; the result is immutable.

One pipeline, imports only go down it (no registration through imports):
  rules.py (data: default_rules.toml + user file; patterns compiled by matchers.py) -> shell_syntax.py (lex, parse)
  -> shell_scan.py (analyse: the Scanner) + shell_options.py (option allow-lists)
     + shell_decode.py (obfuscated command names) + handler tables in shell_commands.py (+ git_objects.py),
     shell_exec.py, shell_network.py, shell_system.py -> bash.py (merges the tables, analyze)
  -> engine.py (decide: checkers, risk patterns, user rules, defaults; around them the guards over the whole
     call: self-approval, protected state, symlink targets, enabling tools). context.py: PolicyContext, the plain data it decides in.
"""

from __future__ import annotations

from foundation.settings import USER_RULES_FILENAME, user_rules_file
from policy.engine import Decision, PolicyContext, decide
from policy.rules import DEFAULT_RULES_FILE, Rules, load_rules

__all__ = [
    "DEFAULT_RULES_FILE",
    "USER_RULES_FILENAME",
    "Decision",
    "PolicyContext",
    "Rules",
    "decide",
    "load_rules",
    "user_rules_file",
]
