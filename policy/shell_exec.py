"""Shell-checker handlers for commands that run other commands: privilege (sudo, su, doas),
shells and interpreters (`sh -c`, `python -c`, `eval`, `source`, `watch`) and wrappers (`env`,
`nice`, `timeout`, `xargs`, `time`, `command`, `exec`, `busybox`, ...). The wrapped command is
analysed as if it stood alone; transparent wrappers let its safety decide the segment's.
"""

from __future__ import annotations

import re

from policy import shell_options
from policy.model import ask, deny
from policy.shell_options import CommandSpec
from policy.shell_scan import (
    DECIDED,
    INLINE_DANGER,
    INLINE_FLAGS,
    INTERPRETERS,
    POWER,
    PRIVILEGED,
    SHELLS,
    Args,
    Handlers,
    Scanner,
    Segment,
    _family,
)
from policy.shell_scan import (
    after_options as _after_options,
)
from policy.shell_scan import (
    operands as _operands,
)
from policy.shell_scan import (
    value_word as _value_word,
)
from policy.shell_syntax import Command, Word

HANDLERS = Handlers()
handles = HANDLERS.handles

# -- privilege, power ------------------------------------------------------------------------

_SUDO_WITH_VALUE = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group",
                              "--chdir", "--host", "--prompt", "--role", "--type", "--other-user", "--close-from",
                              "--command-timeout"})


@handles(*PRIVILEGED, wrapper=True)
def _privileged(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = seg.allowable = False
    an.find(ask(f"`{name}` runs commands with elevated privileges.", "critical", "bash.privileged"))
    if name in ("su", "runuser"):
        commands = [i for i, w in enumerate(args[:-1]) if w.text in ("-c", "--command")]
        for i in commands:
            _run_source(an, args[i + 1], depth, "bash.dynamic_script")
        if not commands:
            _root_shell(an, name)
        return DECIDED
    inner = _after_options(args, _SUDO_WITH_VALUE)
    if _login_flag(args[: len(args) - len(inner)]) or (inner and _interactive_shell(inner)) or (
            name == "pkexec" and not inner):
        _root_shell(an, name)
    if inner:
        an.argv(inner, depth + 1, seg, None, scanned=True)
        seg.safe = False
    return DECIDED


def _root_shell(an: Scanner, name: str) -> None:
    an.find(deny(f"`{name}` opens a root (or another user's) shell.", "critical", "bash.root_shell"))


def _login_flag(options: Args) -> bool:
    """sudo/doas -i, -s, --login, --shell (also bundled: -iu root)."""
    for word in options:
        text = word.text
        if text in ("--login", "--shell"):
            return True
        if re.fullmatch(r"-[A-Za-z]+", text):
            for char in text[1:]:
                if char in "is":
                    return True
                if "-" + char in _SUDO_WITH_VALUE:
                    break
    return False


def _interactive_shell(inner: Args) -> bool:
    """The wrapped command is a shell without a script or -c (`sudo bash`, `sudo su`, `sudo -u x sh -l`)."""
    name = _family(inner[0].text.rsplit("/", 1)[-1])
    rest = [w.text for w in inner[1:]]
    if name in ("su", "sudo", "doas"):
        return not any(r in ("-c", "--command") for r in rest)
    return name in SHELLS and all(r.startswith("-") and "c" not in r for r in rest)


@handles(*POWER)
def _power(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    an.find(ask(f"{name} shuts down or restarts the machine.", "critical", "bash.power"))
    return DECIDED


@handles("systemctl", "init", "telinit")
def _systemctl(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    if {w.text for w in args} & {"poweroff", "reboot", "halt", "kexec", "0", "6", "suspend", "hibernate"}:
        an.find(ask(f"{name} shuts down or restarts the machine.", "critical", "bash.power"))
    return DECIDED


# -- shells, interpreters, eval ----------------------------------------------------------------


def _run_source(an: Scanner, word: Word, depth: int, rule: str) -> None:
    """Analyse a string that will run as shell code (sh -c, eval, watch, su -c)."""
    if word.dynamic:
        _dynamic_code(an, word.subs, depth)
        an.find(ask(f"Runs shell code built at run time: `{word.raw[:60]}`.", "high", rule))
    else:
        an.source(word.text, depth + 1)


def _dynamic_code(an: Scanner, subs: list[str], depth: int) -> None:
    kinds = an.classify_sources(subs, depth + 1)
    if "download" in kinds:
        an.find(deny("Runs code downloaded from the network.", "critical", "bash.download_exec"))
    elif "decode" in kinds:
        an.find(deny("Runs code decoded at run time (obfuscation).", "critical", "bash.decode_exec"))


def _script_operand(an: Scanner, word: Word, depth: int) -> None:
    if word.procsub:
        _dynamic_code(an, word.subs, depth)
        an.find(ask("Runs a script produced by another command.", "high", "bash.procsub_script"))


HERE_OPS = ("<<", "<<-", "<<<")


def _stdin_text(cmd: Command | None) -> Word | None:
    """The heredoc / here-string fed to the command's stdin, if any."""
    return next((r.target for r in cmd.redirects if r.op in HERE_OPS), None) if cmd else None


def _stdin_code(an: Scanner, name: str, cmd: Command | None, depth: int, shell: bool) -> None:
    """A shell/interpreter reading its program from stdin: a heredoc/here-string given to a shell
    is analysed as shell code; any program from a file or string still asks."""
    if cmd is None or not any(r.op in ("<", *HERE_OPS) for r in cmd.redirects):
        return
    text = _stdin_text(cmd)
    if text is not None and shell:
        _run_source(an, text, depth, "bash.dynamic_script")
    elif text is not None:
        _inline_code(an, name, text, depth)
    an.find(ask(f"{name} runs code fed from a file, heredoc or string.", "high", "bash.shell_stdin"))


MAX_INLINE_SCAN = 20_000
_EMBEDDED_SHELL = re.compile(
    r"\b(?:system|popen|exec|execSync|spawnSync|check_output|check_call|call|run|Popen|getoutput)\s*\(\s*(['\"])"
    r"([^'\"\\]{1,2000})\1")


def _inline_code(an: Scanner, name: str, code: Word, depth: int) -> None:
    if code.dynamic:
        _dynamic_code(an, code.subs, depth)
    for shell_code in _EMBEDDED_SHELL.finditer(code.text[:MAX_INLINE_SCAN]):  # os.system("..."), system('...')
        an.source(shell_code.group(2), depth + 1)
    danger = INLINE_DANGER.search(code.text)
    if danger:
        an.find(ask(f"{name} inline code uses `{danger.group()}` (can delete files or run programs).", "high",
                    "bash.inline_code_destructive"))
    else:
        an.find(ask(f"{name} runs inline code.", "medium", "bash.inline_code"))


@handles(*SHELLS)
def _shell(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    cflag, other, i = False, False, 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if text[:1] in "-+" and text not in ("-", "+"):
            if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                other, i = True, i + 2
                continue
            if not text.startswith("--") and "c" in text[1:]:
                cflag = True
            other = other or text != "-c"
            i += 1
            continue
        break
    operands = args[i:]
    if cflag and operands:
        _run_source(an, operands[0], depth, "bash.dynamic_script")
        if other or len(operands) > 1 or operands[0].dynamic:
            seg.safe = False
        return DECIDED
    seg.safe = False
    if operands:
        _script_operand(an, operands[0], depth)
    if not operands or operands[0].text in ("-", "/dev/stdin"):
        _stdin_code(an, name, cmd, depth, shell=True)
    return DECIDED


@handles(*INTERPRETERS)
def _interpreter(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    texts = [w.text for w in args]
    if texts and all(t in ("--version", "-V", "-v", "--help", "-h") for t in texts):
        return None
    seg.safe = False
    code: Word | None = None
    for i, text in enumerate(texts):
        if text in INLINE_FLAGS and i + 1 < len(args):
            code = args[i + 1]
            break
        if _family(name) in ("python", "python3", "python2") and text.startswith("-c") and len(text) > 2:
            code = _value_word(args[i], text[2:])
            break
    operands = _operands(args, frozenset({"-m", "-W", "-X", "-I", "-r", "--require", "-f", "-v"}))
    if code is None and name in ("awk", "gawk", "mawk", "nawk") and operands:
        code = operands[0]
    if code is not None:
        _inline_code(an, name, code, depth)
        return DECIDED
    if operands:
        _script_operand(an, operands[0], depth)
    if not operands or operands[0].text in ("-", "/dev/stdin"):
        _stdin_code(an, name, cmd, depth, shell=False)
    return DECIDED


@handles("eval")
def _eval(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    if any(w.dynamic for w in args):
        seg.safe = seg.allowable = False
        _dynamic_code(an, [s for w in args for s in w.subs], depth)
        an.find(ask("eval runs code built at run time.", "high", "bash.dynamic_eval"))
    elif args:
        an.source(" ".join(w.text for w in args), depth + 1)
    return DECIDED


@handles("source", ".")
def _source(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    if args:
        _script_operand(an, args[0], depth)
    return DECIDED


@handles("watch")
def _watch(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = seg.allowable = False
    inner = _after_options(args, frozenset({"-n", "--interval", "-q", "--equexit"}))
    if not inner:
        return DECIDED
    if any(w.text in ("-x", "--exec") for w in args[: len(args) - len(inner)]):
        an.argv(inner, depth + 1, seg, None, scanned=True)
    else:
        _run_source(an, Word(" ".join(w.text for w in inner), " ".join(w.raw for w in inner),
                             dynamic=any(w.dynamic for w in inner), subs=[s for w in inner for s in w.subs]),
                    depth, "bash.dynamic_script")
    seg.safe = False
    return DECIDED


# -- wrappers --------------------------------------------------------------------------------


def _wrap(an: Scanner, inner: Args, depth: int, seg: Segment, transparent: bool) -> object:
    if not inner:
        seg.safe = False
        return DECIDED
    an.argv(inner, depth + 1, seg, None, scanned=True)
    if not transparent:
        seg.safe = False
    return DECIDED


@handles("env", wrapper=True)
def _env(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    i, transparent, saved = 0, True, an.cwd
    while i < len(args):
        word, text = args[i], args[i].text
        if text in ("-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"):
            i += 1
        elif text in ("-u", "--unset"):
            i += 2
        elif text.startswith(("--unset=", "-u")):
            i += 1
        elif text in ("-S", "--split-string") or text.startswith(("-S", "--split-string=")):
            value = args[i + 1] if text in ("-S", "--split-string") and i + 1 < len(args) else _value_word(
                word, text.split("=", 1)[1] if "=" in text else text[2:])
            seg.safe = False
            _run_source(an, value, depth, "bash.dynamic_script")
            return DECIDED
        elif text in ("-C", "--chdir", "-P") or text.startswith(("--chdir=", "-C")):
            transparent, an.cwd = False, None
            i += 2 if text in ("-C", "--chdir", "-P") else 1
        elif text.startswith("-"):
            transparent = False
            i += 1
        elif "=" in text and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", text):
            an.assignment(word, seg)
            i += 1
        else:
            break
    result = _wrap(an, args[i:], depth, seg, transparent)
    an.cwd = saved
    return result


def _options(name: str, flags: str = "", values: str = "", paths: str = "", risky: dict[str, str] | None = None,
             numeric: bool = False) -> CommandSpec:
    return CommandSpec(name, flags=frozenset(flags.split()), values=frozenset(values.split()),
                       paths=frozenset(paths.split()), risky=risky or {}, numeric=numeric)


WRAPPER_OPTIONS = {
    "nice": _options("nice", "--help --version", "-n --adjustment", numeric=True),
    "nohup": _options("nohup", "--help --version"),
    "builtin": _options("builtin"),
    "unbuffer": _options("unbuffer", "-p"),
    "setsid": _options("setsid", "-c -f -w --ctty --fork --wait"),
    "timeout": _options("timeout", "--foreground --preserve-status -v --verbose", "-s --signal -k --kill-after"),
    "exec": _options("exec", "-c -l", "-a"),
    "stdbuf": _options("stdbuf", "", "-i -o -e --input --output --error"),
    "ionice": _options("ionice", "-t --ignore", "-c -n --class --classdata",
                       risky={"-p": "changes other processes", "-P": "changes other processes",
                              "-u": "changes other processes"}),
    "busybox": _options("busybox"),
    "toybox": _options("toybox"),
    "command": _options("command", "-p"),
    "time": _options("time", "-p -a -v -q --portability --append --verbose --quiet", "-f --format", "-o --output"),
}
"""The options each transparent wrapper may be given, read like its own getopt (abbreviations, bundles,
attached values): any other option makes the wrapper ask (`time --output=f`, `time -of`: writes f)."""


def _wrapper_inner(an: Scanner, name: str, args: Args, seg: Segment) -> tuple[Args, bool]:
    """The wrapped command line and whether the wrapper's own options are all on its allow-list."""
    spec = WRAPPER_OPTIONS.get(name) or _options(name)
    parsed, start = shell_options.leading(spec, [w.text for w in args])
    for value in parsed.paths:  # time -o FILE: the report is written there
        an.write_target(_value_word(next((w for w in args if w.text.endswith(value)), args[0]), value), seg)
    if not parsed.ok:
        seg.note = seg.note or parsed.note
        return _after_options(args, spec.values | spec.paths), False
    return args[start:], not parsed.paths


def _simple_wrapper(transparent: bool = True, skip_operand: bool = False) -> object:
    def handler(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
        inner, known = _wrapper_inner(an, name, args, seg)
        if skip_operand:
            inner = inner[1:]
        return _wrap(an, inner, depth, seg, transparent and known)

    return handler


for _names, _transparent, _skip in (
    (("nice", "nohup", "builtin", "unbuffer", "setsid", "exec", "stdbuf", "ionice", "busybox", "toybox", "time"),
     True, False),
    (("timeout",), True, True),
    (("chrt", "taskset", "numactl", "cgexec", "systemd-run", "flock", "nsenter", "chroot", "unshare", "firejail",
      "bwrap", "proxychains", "proxychains4", "torsocks", "strace", "ltrace", "valgrind", "perf", "gdb", "catchsegv",
      "faketime", "fakeroot", "caffeinate", "nocache", "parallel", "entr", "script", "run-parts", "doppler",
      "dotenv", "op", "aws-vault", "npx", "pnpx", "bunx", "uvx", "pipx"), False, False),
):
    handles(*_names, wrapper=True)(_simple_wrapper(_transparent, _skip))  # type: ignore[arg-type]


@handles("xargs", wrapper=True)
def _xargs(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    inner = _after_options(args, frozenset({"-I", "-n", "-P", "-L", "-s", "-d", "-E", "-a", "--arg-file",
                                            "--delimiter", "--max-args", "--max-procs", "--max-lines",
                                            "--max-chars", "--eof", "--replace", "--process-slot-var"}))
    seg.allowable = False
    return _wrap(an, inner, depth, seg, transparent=False)


@handles("command", wrapper=True)
def _command(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    if any(w.text in ("-v", "-V") for w in args[:2]):
        seg.safe = False  # a lookup, harmless, but not on the safe list
        return DECIDED
    inner, known = _wrapper_inner(an, name, args, seg)
    return _wrap(an, inner, depth, seg, known)


__all__ = ["HANDLERS"]
