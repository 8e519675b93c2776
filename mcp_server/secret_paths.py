"""The approval policy's secret paths handed down to the index (`foundation.calls.SecretPaths`): read_file's
own secret check (`policy.paths.secret_check`: the shipped patterns and the user's, lower-cased spellings
too), so that what a read has to ask for is never indexed nor found by search_documents."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.settings import Settings

if TYPE_CHECKING:  # the policy loads on first use (start-up speed)
    from policy.rules import Rules


class PolicySecretPaths:
    """`rules()` gives the effective rules (the gate's, loaded on first use; the CLI loads its own)."""

    def __init__(self, rules: Callable[[], Rules]) -> None:
        self._rules = rules
        # the rules never change while the server runs: answers are kept (each search checks its hits,
        # ~0.1 ms a path otherwise)
        self._kept = functools.lru_cache(maxsize=8192)(self._rule)
        self._key: str | None = None

    def rule(self, path: str, roots: tuple[Path, ...]) -> str | None:
        return self._kept(path, roots)

    def _rule(self, path: str, roots: tuple[Path, ...]) -> str | None:
        from policy.paths import normalize, root_strings, secret_check

        found = secret_check(self._rules(), path, normalize(path, None, shell=False), root_strings(roots), "files")
        return found.rule_id if found is not None else None

    def store(self, path: str, roots: tuple[Path, ...]) -> bool:
        from policy.paths import matches_any, normalize, root_strings

        return matches_any(self._rules().secret_deny, path, normalize(path, None, shell=False), root_strings(roots))

    def home_store(self, path: str, home: Path) -> bool:
        from policy.paths import matches_any, normalize, root_strings

        rules = self._rules()
        if matches_any(rules.secret_deny, path, normalize(path, None, shell=False), root_strings((home,))):
            return True
        relative = os.path.relpath(path, home).replace(os.sep, "/")  # `^/root` does not make all of /root one
        return any(rules.secret_ask.search(text) is not False for text in {relative, relative.lower()})

    def key(self) -> str:
        if self._key is None:  # the rules never change while the server runs
            rules = self._rules()
            text = json.dumps([rules.secret_deny.sources, rules.secret_ask.sources])
            self._key = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return self._key


def loaded_on_first_use(settings: Settings) -> PolicySecretPaths:
    """For the people-facing commands (no gate): the shipped rules and the user's, loaded on first use."""
    loaded: list[Rules] = []

    def rules() -> Rules:
        if not loaded:
            from policy import load_rules, user_rules_file

            loaded.append(load_rules(user_rules_file(settings.data_dir, settings.policy_file)))
        return loaded[0]

    return PolicySecretPaths(rules)
