"""Per-command handlers of the shell checker: destructive commands, writers, git, cd
(commands that run other commands are in bash_exec.py).

A handler gets the analyser, the command name, its argument words, the nesting depth, the
segment being built and the parsed command (for its redirections). It adds findings and may
mark the segment unsafe. Returning `DECIDED` means "the handler decided the segment's
safety" (wrappers, shells, cd); returning None lets the safe list decide as usual.
"""

from __future__ import annotations

import re

from policy import git_objects, paths
from policy.model import ask, deny
from policy.shell_network import remote_destination
from policy.shell_scan import (
    DECIDED,
    DISK_TOOLS,
    Args,
    Handlers,
    Scanner,
    Segment,
)
from policy.shell_scan import (
    operands as _operands,
)
from policy.shell_scan import (
    short_flags as _short_flags,
)
from policy.shell_scan import (
    value_word as _value_word,
)
from policy.shell_syntax import Command, Word

SYSTEM_DIRS = frozenset({"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc",
                         "/root", "/sbin", "/srv", "/sys", "/usr", "/var", "/Users", "/System", "/Library",
                         "/Applications", "/Volumes", "/private", "/nix", "/snap"})
HOME_DYNAMIC = re.compile(r"(\$HOME|\$\{HOME\}|\$USER|\$\{USER\}|\$PWD|\$\{PWD\}|\$OLDPWD)/?\*?")
HANDLERS = Handlers()
handles = HANDLERS.handles


# -- destructive ------------------------------------------------------------------------------


@handles("rm")
def _rm(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    flags = _short_flags(args)
    longs = {w.text for w in args if w.text.startswith("--")}
    recursive = "r" in flags or "R" in flags or "--recursive" in longs
    force = "f" in flags or "--force" in longs
    if "--no-preserve-root" in longs:
        an.find(deny("rm --no-preserve-root can delete the whole system.", "critical", "bash.rm_catastrophic"))
    for target in _operands(args):
        if (recursive or force) and _catastrophic(an, target):
            an.find(deny(f"rm -{'r' if recursive else ''}{'f' if force else ''} {target.text!r} would delete the "
                         "system, a home folder or a whole workspace.", "critical", "bash.rm_catastrophic"))
        an.write_target(target, seg)
    if recursive:
        an.find(ask("rm -r deletes folders recursively.", "high", "bash.rm_recursive"))
    elif force:
        an.find(ask("rm -f deletes files without confirmation.", "high", "bash.rm_force"))
    else:
        an.find(ask("rm deletes files.", "medium", "bash.rm"))
    return DECIDED


def _catastrophic(an: Scanner, word: Word, roots: bool = True) -> bool:
    """The word names the system, a system folder, a home folder, or (with `roots`) a whole root."""
    text = word.text
    if word.tilde and re.fullmatch(r"~[\w.-]*/?(\*|\.\.?/?)?", text):
        return True
    if word.dynamic:
        return bool(HOME_DYNAMIC.fullmatch(text))
    base = text[:-2] or "/" if text.endswith("/*") else text
    if (word.glob or word.brace) and base == text:  # /{bin,etc}, /b*, /usr/lib*: judge the folder they expand in
        prefix = re.split(r"[*?\[{]", text, maxsplit=1)[0]
        base = (prefix.rstrip("/") or "/") if prefix.endswith("/") else (prefix.rsplit("/", 1)[0] or "/")
    norm = paths.normalize(base, an.cwd)
    if norm is None:
        return False
    if norm in SYSTEM_DIRS or re.fullmatch(r"/(home|Users)/[^/]+", norm):
        return True
    return roots and any(paths.within(root, norm) for root in an.env.roots)


@handles("find")
def _find(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    _find_everything(an, args)
    for i, word in enumerate(args):
        text = word.text
        if text == "-delete":
            seg.safe = False
            an.find(ask("find -delete deletes every match.", "high", "bash.find_delete"))
        elif text in ("-exec", "-execdir", "-ok", "-okdir"):
            seg.safe = False
            inner: Args = []
            for nxt in args[i + 1 :]:
                if nxt.text in (";", "+"):
                    break
                inner.append(nxt)
            shown = " ".join(w.text for w in inner)
            an.find(ask(f"find {text} runs `{shown[:60]}` on every match.", "medium", "bash.find_exec"))
            if inner:
                an.argv(inner, depth + 1, Segment((), shown), None, scanned=True)
        elif text in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(args):
            an.write_target(args[i + 1], seg)
    return None


_DELETERS = frozenset({"rm", "shred", "unlink", "rmdir", "chmod", "chown", "mv", "truncate"})


def _find_everything(an: Scanner, args: Args) -> None:
    """`find / -delete`, `find ~ -exec rm {} +`: deleting (or changing) the whole system or a home
    (inside a workspace, `find . -name '*.pyc' -delete` stays an ask)."""
    starts: Args = []
    for word in args:
        if word.text.startswith("-") and word.text not in ("-H", "-L", "-P") or word.text in ("(", "!"):
            break
        if word.text not in ("-H", "-L", "-P"):
            starts.append(word)
    texts = [w.text for w in args]
    runs = [texts[i + 1].rsplit("/", 1)[-1] for i, t in enumerate(texts[:-1]) if t in ("-exec", "-execdir", "-ok", "-okdir")]
    destroys = "-delete" in texts or any(r in _DELETERS for r in runs)
    if destroys and any(_catastrophic(an, w, roots=False) for w in starts):
        an.find(deny("find would delete or change the whole system, a home folder or a whole workspace.",
                     "critical", "bash.find_catastrophic"))


@handles("dd")
def _dd(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    for word in args:
        if word.text.startswith("of="):
            an.write_target(_value_word(word, word.text[3:]), seg)
        elif word.text.startswith("if="):
            an.secret(word.text[3:])
    an.find(ask("dd copies raw data and can overwrite files or disks.", "high", "bash.dd"))
    return DECIDED


@handles("mkfs")
def _mkfs(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    an.find(deny(f"{name} formats or wipes a disk.", "critical", "bash.mkfs"))
    return DECIDED


@handles(*DISK_TOOLS)
def _disk(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    an.find(ask(f"{name} changes disk partitions or devices.", "critical", "bash.disk_tool"))
    return DECIDED


@handles("shred")
def _shred(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    for target in _operands(args, frozenset({"-n", "-s", "--iterations", "--size"})):
        an.write_target(target, seg)
    an.find(ask("shred destroys file contents irrecoverably.", "high", "bash.shred"))
    return DECIDED


@handles("chmod", "chown", "chgrp")
def _chmod(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    operands = _operands(args)
    if not any(w.text.startswith("--reference") for w in args):
        operands = operands[1:]
    for target in operands:
        an.write_target(target, seg)
    if "R" in _short_flags(args) or any(w.text == "--recursive" for w in args):
        an.find(ask(f"{name} -R changes permissions/ownership of whole trees.", "high", "bash.chmod_recursive"))
    return DECIDED


@handles("tee", "touch", "mkdir", "rmdir", "unlink", "truncate", "mv")
def _writes_all(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    with_value = frozenset({"-s", "-r", "--size", "--reference", "-m", "--mode", "-t", "--target-directory",
                            "-S", "--suffix", "-d", "--date"})
    for target in _operands(args, with_value):
        an.write_target(target, seg)
    for word in args:
        if word.text.startswith("--target-directory="):
            an.write_target(_value_word(word, word.text.split("=", 1)[1]), seg)
    return DECIDED


@handles("cp", "ln", "install", "rsync", "scp")
def _copies(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    with_value = frozenset({"-t", "--target-directory", "-S", "--suffix", "-m", "--mode", "-o", "-g", "-e",
                            "--exclude", "--include", "-P", "-i", "-F", "-l", "-c"})
    for i, word in enumerate(args):
        if word.text in ("-t", "--target-directory") and i + 1 < len(args):
            an.write_target(args[i + 1], seg)
            return DECIDED
        if word.text.startswith("--target-directory="):
            an.write_target(_value_word(word, word.text.split("=", 1)[1]), seg)
            return DECIDED
    operands = _operands(args, with_value)
    dest = operands[-1] if len(operands) >= 2 else None
    if name == "ln" and ("s" in _short_flags(args) or "--symbolic" in {w.text for w in args}):
        for source in operands[:-1] if len(operands) >= 2 else operands:
            norm = None if source.dynamic else paths.normalize(source.text, an.cwd)
            if norm is None or not paths.inside_roots(norm, an.env.roots):
                an.find(ask(f"ln -s {source.text!r} links to a place outside the workspace; later reads through "
                            "the link would not be checked.", "high", "bash.symlink_outside"))
    if dest is not None and name in ("rsync", "scp") and remote_destination(dest):
        if any(not remote_destination(w) for w in operands[:-1]):
            an.find(deny(f"{name} copies files to another host (exfiltration).", "critical", "bash.exfiltration"))
    elif dest is not None and not (name in ("rsync", "scp") and re.match(r"[^/]*:", dest.text)):
        an.write_target(dest, seg)
    if name == "rsync" and any(w.text.startswith("--delete") for w in args):
        an.find(ask("rsync --delete removes files at the destination.", "high", "bash.rsync_delete"))
    return DECIDED


@handles("uniq")
def _uniq(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    operands = _operands(args, frozenset({"-f", "-s", "-w", "--skip-fields", "--skip-chars", "--check-chars"}))
    if len(operands) >= 2:
        an.write_target(operands[1], seg)  # uniq INPUT OUTPUT writes OUTPUT
    return None


@handles("sed")
def _sed(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    texts = [w.text for w in args]
    if not any(t.startswith("-i") or t.startswith("--in-place") for t in texts):
        return DECIDED
    operands = _operands(args, frozenset({"-e", "-f", "--expression", "--file", "-l"}))
    files = operands if any(t in ("-e", "-f") or t.startswith(("--expression", "--file")) for t in texts) else operands[1:]
    for target in files:
        an.write_target(target, seg)
    return DECIDED


# -- git -------------------------------------------------------------------------------------

_GIT_GLOBAL_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path",
                                    "--config-env", "--super-prefix"})


def signature_format(text: str) -> bool:
    """Whether a git pretty format (`--format`, `--pretty=format:`, `branch --format`) holds a placeholder
    that verifies a signature and so runs gpg: `%G?`, `%GS`, `%GK`, `%GG`... (after `+`, `-` or ` `; `%%` is
    a literal percent) or a `%(signature...)` atom."""
    i = 0
    while (i := text.find("%", i)) >= 0:
        if text.startswith("%%", i):
            i += 2
            continue
        j = i + 1 + (text[i + 1 : i + 2] in ("+", "-", " ") and i + 2 < len(text))
        if text.startswith("G", j) or text.startswith("(signature", j):
            return True
        i += 1
    return False


@handles("git")
def _git(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    i = 0
    while i < len(args) and args[i].text.startswith("-"):
        text = args[i].text
        if text in ("-c", "--config-env") or text.startswith("--config-env="):
            an.find(ask("git -c/--config-env can make git run arbitrary programs.", "high", "bash.git_config_override"))
        i += 2 if text in _GIT_GLOBAL_WITH_VALUE else 1
    if i >= len(args):
        return None
    sub, rest = args[i].text, args[i + 1 :]
    texts = [w.text for w in rest]
    if i > 0:  # rules like "git push:*" also see "git -C dir push" as "git push"
        seg.texts += (" ".join(["git", sub, *texts]),)
    flags = _short_flags(rest)
    _git_config_programs(an, sub, seg)
    if any(signature_format(t) for t in texts):  # a word that is no format asks too (rare: `commit -m 5%G`)
        an.find(ask("This git format verifies signatures, which runs gpg.", "medium", "bash.git_signature"))
    _git_repository_reads(an, sub, rest, seg)
    if sub == "push":
        if ({"--force", "--mirror", "--force-if-includes"} & set(texts) or "f" in flags
                or any(t.startswith("--force-with-lease") or t.startswith("+") for t in texts)):
            an.find(ask("git push --force rewrites remote history.", "high", "bash.git_force_push"))
        elif "--delete" in texts or "d" in flags or any(t.startswith(":") for t in texts):
            an.find(ask("git push --delete removes remote branches or tags.", "high", "bash.git_push_delete"))
    elif sub == "reset" and ("--hard" in texts or "--merge" in texts or "--keep" in texts):
        an.find(ask("git reset --hard discards uncommitted work.", "high", "bash.git_reset_hard"))
    elif sub == "clean" and ("f" in flags or "--force" in texts):
        an.find(ask("git clean -f deletes untracked files.", "high", "bash.git_clean"))
    elif sub in ("checkout", "switch") and ("--" in texts or "." in texts or "f" in flags or "--force" in texts
                                           or "--discard-changes" in texts):
        an.find(ask("This git checkout discards local changes.", "medium", "bash.git_discard"))
    elif sub == "restore":
        an.find(ask("git restore discards local changes.", "medium", "bash.git_discard"))
    elif sub == "branch" and ("D" in flags or ("d" in flags and "f" in flags) or "--delete" in texts):
        an.find(ask("git branch -D deletes a branch.", "medium", "bash.git_branch_delete"))
    elif sub == "stash" and texts[:1] in (["drop"], ["clear"]):
        an.find(ask("git stash drop/clear deletes stashed work.", "medium", "bash.git_stash_drop"))
    elif sub in ("filter-branch", "filter-repo", "update-ref") or (sub == "reflog" and texts[:1] in (["expire"], ["delete"])):
        an.find(ask(f"git {sub} rewrites history or refs.", "high", "bash.git_history_rewrite"))
    return None


def _git_config_programs(an: Scanner, sub: str, seg: Segment) -> None:
    """A repository whose own config names a program (`core.fsmonitor`, `diff.external`, a textconv driver, a
    clean filter, ...): git may run it for any sub-command, so every git command there asks."""
    if an.env.repo_programs is None or an.cwd is None:
        return
    folder = an.env.real_path(an.cwd) if an.env.real_path is not None else an.cwd
    keys = an.env.repo_programs(folder)
    if keys:
        seg.safe = False
        shown = ", ".join(keys[:3]) + (", ..." if len(keys) > 3 else "")
        an.find(ask(f"This repository's config names a program git can run ({shown}); `git {sub}` could run it.",
                    "high", "bash.git_config_program"))


def _git_repository_reads(an: Scanner, sub: str, rest: Args, seg: Segment) -> None:
    """What a git sub-command reads from the repository rather than the file system: `rev:path` words are
    judged as the paths git resolves them to, and in a repository whose top lies outside the roots the
    sub-commands that print file contents ask (`git log -p` prints every file of the repository)."""
    top = git_objects.work_tree_top(an.cwd, an.env.git_tops, an.env.roots)
    outside = top is None or not paths.inside_roots(top, an.env.roots)
    texts = [w.text for w in rest]
    listing = sub in git_objects.LOG_SUBCOMMANDS or (sub == "stash" and texts[:1] == ["list"])
    prints = not git_objects.names_only_log(texts) if listing else sub in git_objects.CONTENT_SUBCOMMANDS
    if outside and prints:
        seg.safe = False
        an.find(ask(f"git {sub} can print files of the repository at {top or '(unknown)'}, which reaches outside "
                    "the workspace roots.", "medium", "bash.git_outside_roots"))
    if sub not in git_objects.OBJECT_SUBCOMMANDS or an.cwd is None:
        return
    for word in rest:
        found = None if word.dynamic or word.text.startswith("-") else git_objects.object_path(word.text, an.cwd, top or an.cwd)
        if found is None:
            continue
        real, written = found
        if outside or not paths.inside_roots(real, an.env.roots):
            seg.safe = False
            seg.note = seg.note or f"{word.text} reads {real}, outside the workspace roots"
        decision = paths.secret_check(an.rules, written, real, an.env.roots, "bash")
        if decision is not None:
            an.find(decision)


# -- cwd -------------------------------------------------------------------------------------


@handles("cd")
def _cd(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    operands = _operands(args)
    target = operands[0] if operands else None
    if target is None or target.dynamic or target.tilde or target.text == "-":
        an.cwd = None
        seg.safe = False
        return DECIDED
    an.cwd = paths.normalize(target.text, an.cwd)
    if an.cwd is None or not paths.inside_roots(an.cwd, an.env.roots) or not an.real_inside(an.cwd):
        seg.safe = False
        seg.note = seg.note or f"cd {target.text} leads outside the workspace roots"
    return DECIDED


@handles("pushd", "popd")
def _pushd(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    an.cwd = None
    seg.safe = False
    return DECIDED


__all__ = ["HANDLERS", "SYSTEM_DIRS"]
