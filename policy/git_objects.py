"""What a git command can print from the repository: the files named by `rev:path` words, and whether a
sub-command prints file contents at all (pure; the top of the work tree is a fact found at the edge).

A repository whose work tree top lies above the workspace roots holds files outside them: `git show
HEAD:../x` or `git log -p` print those without touching the file system there.
"""

from __future__ import annotations

import os
import re

from policy import paths

OBJECT_SUBCOMMANDS = frozenset({"show", "diff", "cat-file", "log", "whatchanged", "rev-parse", "ls-tree", "archive",
                                "grep", "difftool", "blame", "annotate", "shortlog", "describe", "format-patch",
                                "reflog", "stash", "notes", "bundle", "checkout", "restore", "switch"})
"""Sub-commands whose operands may be `rev:path` words (object names); elsewhere `host:path` and `:branch`
mean other things (push, remote, clone)."""

CONTENT_SUBCOMMANDS = frozenset({"show", "diff", "cat-file", "archive", "grep", "difftool", "blame", "annotate",
                                 "format-patch", "bundle", "notes", "stash", "range-diff", "fast-export", "ls-tree",
                                 "verify-pack", "unpack-file", "merge-file", "merge-tree", "apply"})
"""Sub-commands that can print what the repository holds (contents; ls-tree names every file): asked for in a
repository that reaches outside the roots."""

LOG_SUBCOMMANDS = frozenset({"log", "whatchanged", "reflog", "shortlog"})
"""History listings: they print contents only with diff options, so they ask unless every option is one of
LOG_NAMES_ONLY (an allow-list; file names and commit data are shown, as `git status` shows names)."""

LOG_NAMES_ONLY = frozenset({
    "--oneline", "--graph", "--all", "--branches", "--tags", "--remotes", "--reverse", "--first-parent",
    "--no-merges", "--merges", "--abbrev-commit", "--no-abbrev-commit", "--relative-date", "--no-patch", "-s",
    "--stat", "--shortstat", "--numstat", "--name-only", "--name-status", "--summary", "--compact-summary", "--raw",
    "--no-color", "--topo-order", "--date-order", "--author-date-order", "--parents", "--children", "--left-right",
    "--boundary", "--no-decorate", "--source", "--mailmap", "--no-mailmap", "--no-renames", "--no-notes",
    "--no-walk", "--full-history", "--simplify-merges", "--ancestry-path", "--cherry-pick", "--cherry-mark",
    "--walk-reflogs", "-g", "--follow", "--no-ext-diff", "--no-textconv", "--numbered", "--email", "--committer",
    "--decorate", "--color", "--abbrev", "--dirstat",
})
LOG_SHORT_NAMES_ONLY = re.compile(r"-[sneg]+|-n\d+")
"""Short flag clusters that print no contents: -s (no patch; shortlog: summary), -n N, -e (shortlog: emails),
-g (reflog walk)."""
LOG_VALUED = frozenset({"-n", "--max-count", "--skip", "--since", "--after", "--until", "--before", "--author",
                        "--committer", "--grep", "--date", "--format", "--pretty", "--group"})
"""Options of history listings that take a value (`--date=iso` or `--date iso`)."""
LOG_OPTIONAL_VALUE = frozenset({"--decorate", "--color", "--abbrev", "--stat", "--dirstat", "--pretty"})


def names_only_log(words: list[str]) -> bool:
    """True when a history listing's options (`words`, after the sub-command) print no file contents."""
    skip = False
    for text in words:
        if skip:
            skip = False
            continue
        if text == "--":
            return True
        if not text.startswith("-") or text == "-":
            continue
        name, eq, _ = text.partition("=")
        if text[1:].isdigit() or (not eq and text in LOG_NAMES_ONLY) or LOG_SHORT_NAMES_ONLY.fullmatch(text):
            continue
        if name in LOG_VALUED or (eq and name in LOG_OPTIONAL_VALUE):
            skip = not eq
            continue
        return False
    return True


def object_path(word: str, cwd: str, top: str) -> tuple[str, str] | None:
    """The file a `rev:path` object name reads, as git resolves it, and the path part as written; None when
    `word` names no path (no `:`, `:/message`, `rev:` alone). `./x` and `../x` are relative to the current
    folder `cwd`, any other path to the work tree `top` (both normalised absolute paths); `:x` and `:N:x` name
    the index. The first `:` outside `{...}` ends the revision (`HEAD^{/fix: x}:path`)."""
    if word.startswith(":"):
        rest = word[1:]
        if rest.startswith("/"):
            return None  # `:/text`: the youngest commit whose message matches
        if len(rest) >= 2 and rest[0] in "0123" and rest[1] == ":":
            rest = rest[2:]
        path = rest
    else:
        depth, cut = 0, -1
        for i, c in enumerate(word):
            if c == "{":
                depth += 1
            elif c == "}" and depth:
                depth -= 1
            elif c == ":" and not depth:
                cut = i
                break
        if cut <= 0:
            return None
        path = word[cut + 1 :]
    if not path:
        return None
    base = cwd if path.startswith(("./", "../")) else top
    return os.path.normpath(os.path.join(base, path)), path


def work_tree_top(cwd: str | None, tops: tuple[tuple[str, str], ...], roots: tuple[str, ...]) -> str | None:
    """The work tree top for a command running in `cwd`: the one found at the edge for the innermost root
    holding `cwd`, else that root (a repository inside the roots has its top inside them too); None when
    `cwd` is unknown or outside the roots."""
    if cwd is None:
        return None
    holding = [r for r in roots if paths.within(cwd, r)]
    if not holding:
        return None
    root = max(holding, key=len)
    return dict(tops).get(root, root)
