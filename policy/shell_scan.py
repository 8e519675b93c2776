"""The shell-command scanner: the "analyse" step of the policy pipeline (lex -> parse -> analyse -> decide).

It parses the command line (`shell_syntax`), then looks at every simple command, including
the ones nested in `$( )`, backticks, process substitution, `sh -c`/`eval`/`watch` strings and
behind wrappers (`env`, `sudo`, `xargs`, `timeout`, `nice`, `nohup`, `time`, `command`,
`exec`, `find -exec`, `busybox`, ...). It reports explicit findings (deny/ask with a rule id)
and, per simple command, whether it is positively safe (on the safe list, literal words,
nothing written, paths inside the roots). The engine allows a command line only when every
segment is safe or allowed by a user rule and nothing was found; otherwise it asks. So an
unknown or unparseable construct can only ever lead to "ask" or "deny".
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from policy import paths, shell_decode, shell_options
from policy.model import Decision, ask, deny
from policy.rules import Rules
from policy.shell_syntax import Command, Group, ParseError, Pipeline, Script, Word, parse

MAX_SEGMENTS = 400
MAX_DEPTH = 8
STD_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/usr/local/sbin",
                          "/opt/homebrew/bin", "/run/current-system/sw/bin"})
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "yash"})
INTERPRETERS = frozenset({"python", "python2", "python3", "pypy", "pypy3", "perl", "ruby", "node", "nodejs", "php",
                          "deno", "bun", "lua", "luajit", "rscript", "osascript", "pwsh", "powershell", "tclsh",
                          "awk", "gawk", "mawk", "nawk", "jshell", "irb"})
INLINE_FLAGS = frozenset({"-c", "-e", "-E", "--eval", "-p", "--print", "-r", "-command", "-Command", "-x"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "httpie", "xh", "lwp-download",
                         "lwp-request", "nc", "ncat", "netcat", "socat", "ftp", "tftp", "scp", "sftp", "ssh", "rsync"})
PRIVILEGED = frozenset({"sudo", "su", "doas", "pkexec", "run0", "sudoedit", "runuser"})
POWER = frozenset({"shutdown", "reboot", "halt", "poweroff"})
DISK_FORMAT = re.compile(r"mkfs(\..*)?|mke2fs|mkswap|wipefs|mkdosfs|mkntfs|newfs(_.*)?")
DISK_TOOLS = frozenset({"fdisk", "sfdisk", "cfdisk", "parted", "gdisk", "sgdisk", "blkdiscard", "hdparm"})
DEVICE = re.compile(r"^/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|rdisk|mapper/|md|dm-|loop|nbd)")
DANGEROUS_ENV = re.compile(
    r"(PATH|IFS|ENV|BASH_ENV|PROMPT_COMMAND|PS4|SHELLOPTS|BASHOPTS|HOME|ZDOTDIR|XDG_CONFIG_HOME|PAGER|EDITOR|"
    r"VISUAL|LESSOPEN|LESSCLOSE|PYTHONPATH|PYTHONSTARTUP|PYTHONHOME|PERL5LIB|PERL5OPT|NODE_OPTIONS|RUBYOPT|"
    r"SSH_ASKPASS|SUDO_ASKPASS|LD_.*|DYLD_.*|GIT_.*|BASH_FUNC_.*)")
INLINE_DANGER = re.compile(
    r"rmtree|os\.(remove|unlink|rmdir|removedirs|system|popen|exec\w*|spawn\w*|kill|chmod|chown|truncate|rename|replace)"
    r"|subprocess|pty\.spawn|shutil\.(move|copy\w*)|\.unlink\(|\.rmdir\(|\.write_(text|bytes)\(|open\([^)]*['\"][wax+]"
    r"|__import__|\beval\(|\bexec\(|child_process|\b(rm|rmdir|unlink|writeFile)Sync\b|\bexecSync\b|\bspawnSync\b"
    r"|\bfs\.(rm|rmdir|unlink|writeFile)|\bsystem\s*\(|\bunlink\b|\bqx\b|`|File\.delete|FileUtils\.rm"
    r"|Remove-Item|\brm\s+-|\bsocket\b|urllib|requests\.|http\.client")
DECODERS: dict[str, tuple[str, ...]] = {
    "base64": ("-d", "-D", "--decode"), "base32": ("-d", "--decode"), "xxd": ("-r", "-revert"),
    "openssl": ("-d", "-base64", "base64"), "gzip": ("-d", "--decompress"), "uudecode": (), "gunzip": (),
    "zcat": (), "bzcat": (), "xzcat": (), "unxz": (), "rev": (), "tr": (),
}
PIECE_SPLIT = re.compile(r"[=:,@{}\s'\"()\[\];]+")
KEYWORDS_TRANSPARENT = frozenset({"!", "if", "then", "else", "elif", "do", "while", "until", "{"})
KEYWORDS_END = frozenset({"fi", "done", "esac", "}"})
KEYWORDS_UNSUPPORTED = frozenset({"for", "case", "select", "function", "[[", "coproc", "declare", "typeset",
                                  "local", "export", "readonly", "alias", "trap", "shopt", "set", "unset"})
_PARENT = re.compile(r"(^|/)\.\.(/|$)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HIDDEN_GLOB = re.compile(r"(^|/)\.[^/]*[*?\[]")  # a glob that can match hidden files (.ss?/id_rsa)
NET_DEVICE = re.compile(r"/dev/(tcp|udp)/")
OUT_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})


@dataclass(frozen=True)
class Env:
    rules: Rules
    roots: tuple[str, ...]
    protected: tuple[str, ...]
    git_tops: tuple[tuple[str, str], ...] = ()  # (root, top of the git work tree holding it), found at the edge
    real_path: Callable[[str], str] | None = None  # an absolute path with its symlinks resolved (the gate's,
    # as for file tools); None: paths are judged as written
    repo_programs: Callable[[str], tuple[str, ...]] | None = None  # the program-valued config keys of the
    # repository git uses in a folder (`core.fsmonitor`, `diff.external`, ...), found at the edge


@dataclass
class Segment:
    """One simple command: `texts` are matched by user allow rules (outer and wrapped command)."""

    texts: tuple[str, ...]
    display: str
    safe: bool = True
    allowable: bool = True
    note: str = ""  # why it is not safe, when known ("writes out.txt")


@dataclass
class Report:
    command: str
    findings: list[Decision] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)

    def all_texts(self) -> list[str]:
        return [t for s in self.segments for t in s.texts]


Args = list[Word]


def operands(args: Args, with_value: frozenset[str] = frozenset()) -> Args:
    """Non-option words (everything after `--` counts as an operand)."""
    out: Args = []
    skip = end = False
    for word in args:
        if skip:
            skip = False
            continue
        text = word.text
        if not end and text == "--":
            end = True
        elif not end and text.startswith("-") and text != "-":
            skip = text in with_value
        else:
            out.append(word)
    return out


def after_options(args: Args, with_value: frozenset[str] = frozenset()) -> Args:
    """The words after the leading options (the wrapped command and its arguments)."""
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            return args[i + 1 :]
        if not text.startswith("-") or text == "-":
            return args[i:]
        i += 2 if text in with_value else 1
    return []


def value_word(word: Word, value: str) -> Word:
    return Word(value, value, dynamic=word.dynamic, tilde=value.startswith("~"), glob=word.glob)


def short_flags(args: Args) -> str:
    return "".join(w.text[1:] for w in args if re.fullmatch(r"-[A-Za-z]+", w.text))


DECIDED = object()  # a handler's return value: "I decided this segment's safety" (wrappers, shells, cd)
Handler = Callable[["Scanner", str, list[Word], int, "Segment", "Command | None"], object]


@dataclass
class Handlers:
    """Per-command handlers by command name, and which of them wrap another command (sudo, env, ...).
    Each handler module builds its own table; `bash.analyze` merges them (no registration by import)."""

    table: dict[str, Handler] = field(default_factory=dict)
    wrappers: set[str] = field(default_factory=set)

    def handles(self, *names: str, wrapper: bool = False) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            for name in names:
                self.table[name] = fn
                if wrapper:
                    self.wrappers.add(name)
            return fn

        return register

    def merged(self, other: Handlers) -> Handlers:
        return Handlers({**self.table, **other.table}, self.wrappers | other.wrappers)


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _basename(text: str, exact: bool = False) -> str:
    """The command's name, lower-cased: what it may be on a case-insensitive file system (`RM` is `rm`
    there), for the checks that find danger. The allow-list takes only the `exact` spelling (on Debian
    `HEAD` is libwww-perl's HTTP client, not `head`)."""
    name = text.rsplit("/", 1)[-1]
    name = name if exact else name.lower()
    return name[:-4] if name.lower().endswith(".exe") else name


def _spec_name(name: str, specs: Mapping[str, object]) -> str:
    """The allow-list a command name is read with: its own, or for a versioned interpreter (python3.11,
    node18) its family's. Other names never borrow one (diff3 is not diff, sort1 is not sort)."""
    family = _family(name)
    return family if name not in specs and family in INTERPRETERS else name


def _family(name: str) -> str:
    """python3.11 -> python3, perl5.36 -> perl, node18 -> node."""
    stripped = re.sub(r"[\d.]+$", "", name)
    if name.startswith("python3"):
        return "python3"
    return stripped or name


class Scanner:
    def __init__(self, command: str, env: Env, handlers: Handlers) -> None:
        self.env = env
        self.handlers = handlers
        self.rules = env.rules
        self.report = Report(command)
        self.cwd: str | None = env.roots[0]
        self.piped = False  # the current command's stdin is fed (pipe, file, heredoc)
        self.assigned: dict[str, str] = {}  # literal `NAME=value` commands seen so far (for `$NAME args`)
        self._secret_seen: set[tuple[str, str | None]] = set()

    # -- bookkeeping

    def find(self, decision: Decision) -> None:
        if decision not in self.report.findings and len(self.report.findings) < 50:
            self.report.findings.append(decision)

    def unsafe_segment(self, text: str) -> None:
        self.report.segments.append(Segment((_short(text, 10_000),), _short(text), safe=False, allowable=False))

    # -- structure

    def source(self, text: str, depth: int) -> None:
        """Parse and analyse a piece of shell source (top level, $( ), sh -c, eval, ...)."""
        if depth > MAX_DEPTH:
            self.find(ask("Commands are nested too deeply to analyse.", "high", "bash.too_deep"))
            self.unsafe_segment(text)
            return
        try:
            script = parse(text, depth)
        except ParseError as exc:
            self.find(ask(f"Cannot analyse `{_short(text)}` ({exc}); asking.", "high", "bash.unparsed"))
            self.unsafe_segment(text)
            return
        self.script(script, depth)

    def script(self, script: Script, depth: int) -> None:
        for pipeline in script:
            self.pipeline(pipeline, depth)

    def pipeline(self, pipeline: Pipeline, depth: int) -> None:
        literal_so_far = True  # every element before this one only prints literal text
        for index, elem in enumerate(pipeline):
            saved = self.cwd
            if isinstance(elem, Group):
                seg = Segment((), "( … )")
                self.redirects(elem.redirects, seg, depth)
                self.script(elem.script, depth)
                self.cwd = saved
                if not seg.safe:
                    self.report.segments.append(seg)
            else:
                self.command(elem, depth, stdin_piped=index > 0 and not literal_so_far)
                if len(pipeline) > 1:
                    self.cwd = saved
            literal_so_far = literal_so_far and _literal_text(elem)
            if len(self.report.segments) > MAX_SEGMENTS:
                self.find(ask("The command has too many parts to analyse.", "high", "bash.too_complex"))
                return
        self.pipe_to_interpreter(pipeline)

    def command(self, cmd: Command, depth: int, stdin_piped: bool) -> None:
        saved = self.cwd
        for word in [*cmd.assigns, *cmd.words]:
            for sub in word.subs:
                self.source(sub, depth + 1)
        self.cwd = saved
        display = _short(" ".join(w.text for w in [*cmd.assigns, *cmd.words]) or "(redirection)")
        seg = Segment((), display)
        for assign in cmd.assigns:
            self.assignment(assign, seg)
            if not cmd.words and not assign.dynamic and len(self.assigned) < 100:
                name, _, value = assign.text.partition("=")
                self.assigned[name] = value
        self.redirects(cmd.redirects, seg, depth)
        if cmd.words:  # (set after nested $( ) sources, which reset it for their own commands)
            self.piped = stdin_piped or any(r.op == "<" for r in cmd.redirects)
            self.argv(cmd.words, depth, seg, cmd)
        if seg.texts or not seg.safe:
            seg.texts = seg.texts or (display,)
            self.report.segments.append(seg)

    def assignment(self, word: Word, seg: Segment) -> None:
        name = word.text.split("=", 1)[0].rstrip("+").split("[", 1)[0]
        seg.safe = False
        if DANGEROUS_ENV.fullmatch(name):
            self.find(ask(f"Setting {name} changes which programs or code run.", "high", "bash.env_override"))
        for piece in self.pieces(word):
            self.secret(piece)

    def redirects(self, redirects: list, seg: Segment, depth: int) -> None:  # type: ignore[type-arg]
        for redirect in redirects:
            target: Word = redirect.target
            for sub in target.subs:
                self.source(sub, depth + 1)
            if redirect.op in OUT_OPS or (redirect.op == ">&" and not re.fullmatch(r"\d+|-", target.text)):
                self.write_target(target, seg, redirect=True)
            elif redirect.op in ("<", "<&") and not re.fullmatch(r"\d+|-", target.text):
                if NET_DEVICE.match(target.text):
                    self.find(deny("Reads from a network socket (/dev/tcp): a reverse shell or a download.",
                                   "critical", "bash.reverse_shell"))
                self.secret(target.text)
                self.read_path(target, seg)
            elif redirect.op in ("<<<", "<<", "<<-"):
                seg.safe = False  # a here-string/heredoc feeds data to stdin (maybe a script)

    # -- one argv (recursive through wrappers)

    def argv(self, words: list[Word], depth: int, seg: Segment, cmd: Command | None, scanned: bool = False) -> None:
        """Analyse one argv; `scanned`: its words were already checked (a wrapper's inner command)."""
        if depth > MAX_DEPTH * 4:
            self.find(ask("Commands are wrapped too deeply to analyse.", "high", "bash.too_deep"))
            seg.safe = seg.allowable = False
            return
        head = words[0]
        if head.dynamic or (head.glob and head.text != "[") or head.brace or head.procsub or not head.text.strip():
            self.dynamic_head(head, depth, seg, words[1:])
            return
        raw = head.text
        name = _basename(raw)
        std = "/" not in raw or os.path.dirname(raw) in STD_BIN_DIRS
        args = words[1:]
        seg.texts += (" ".join([raw if not std else raw.rsplit("/", 1)[-1], *(w.text for w in args)]),)
        if not std or head.tilde:
            seg.safe = False
        for word in () if scanned else args:
            for piece in self.pieces(word):
                self.secret(piece)
            if word.dynamic:  # values unknown in advance ($X, $( ), $((x)) which can even run code)
                seg.safe = seg.allowable = False
            if _PARENT.search(word.text):  # allow globs see words as written: "notes/../x" is not in notes/
                seg.allowable = False
        if name in KEYWORDS_TRANSPARENT:
            if args:
                self.argv(args, depth + 1, seg, cmd, scanned=True)
            return
        if name in KEYWORDS_END and not args:
            return
        if name in KEYWORDS_UNSUPPORTED:
            seg.safe = False
            return
        if _basename(raw, exact=True) != name:  # another spelling of a listed name: another program (HEAD)
            seg.safe = False
            if name in self.rules.shell.commands:
                seg.note = seg.note or f"`{_short(raw, 40)}` is not spelled as on the allow-list ({name})"
        table = self.handlers.table
        handler = table.get(name) or table.get(_family(name))
        if handler is None and DISK_FORMAT.fullmatch(name):
            handler = table.get("mkfs")
        if handler is not None and handler(self, name, args, depth, seg, cmd) is DECIDED:
            return
        if not self.is_safe(name, raw, args, seg):
            seg.safe = False

    def dynamic_head(self, head: Word, depth: int, seg: Segment, rest: list[Word]) -> None:
        seg.safe = seg.allowable = False
        decoded = shell_decode.head_text(head, self.assigned)
        if decoded is not None and decoded.strip():  # judge what would really run, too
            self.source(" ".join([decoded, *(w.raw for w in rest)]), depth + 1)
        kinds = self.classify_sources(head.subs, depth)
        if "download" in kinds:
            self.find(deny("Runs a command downloaded from the network.", "critical", "bash.download_exec"))
        elif "decode" in kinds:
            self.find(deny("Runs a command decoded at run time (obfuscation).", "critical", "bash.decode_exec"))
        self.find(ask(f"The command name `{_short(head.raw, 40)}` is computed at run time; cannot check it.",
                      "high", "bash.dynamic_command"))

    # -- safety of a plain command (layer 4)

    def is_safe(self, name: str, raw: str, args: list[Word], seg: Segment) -> bool:
        """Positively safe: a standard command, literal words, every option on its allow-list and
        every path (operands, path-option values) inside the roots (or a user `safe_commands` glob)."""
        shell = self.rules.shell
        if "/" in raw and os.path.dirname(raw) not in STD_BIN_DIRS:
            return False
        words = [w.text for w in args]
        text = " ".join([raw.rsplit("/", 1)[-1], *words])
        if any(w.dynamic or w.brace or w.procsub or w.tilde or _HIDDEN_GLOB.search(w.text) for w in args):
            return False
        if _CONTROL.search(text) or self.forbidden(name, words):
            return False
        if any(p.fullmatch(text) for p in shell.safe_commands):  # the user's own whole-command globs
            return name in shell.no_path_commands or all(self.path_inside(w) for w in words)
        parsed = shell_options.check(_spec_name(name, shell.commands), words, shell.commands)
        for value in parsed.paths:
            self.secret(value)
        if not parsed.ok:
            seg.note = seg.note or parsed.note
            return False
        outside = next((p for p in [*parsed.operands, *parsed.paths] if not self.path_inside(p, option=False)), None)
        if outside is not None:
            norm = paths.normalize(outside, self.cwd)
            real = self.real(norm) if norm is not None and paths.inside_roots(norm, self.env.roots) else None
            where = f"leads through a symlink to {_short(real, 60)}, " if real else "is "
            seg.note = seg.note or f"{_short(outside, 60)} {where}outside the workspace roots"
        return outside is None

    def forbidden(self, name: str, words: list[str]) -> bool:
        """A user's `forbidden_options` for this command, as written or as a long-option abbreviation."""
        banned = self.rules.shell.forbidden_options.get(name, ())
        if not banned:
            return False
        spec = self.rules.shell.commands.get(name)
        for word in words:
            full = shell_options.resolve_long(spec, word.split("=", 1)[0]) if spec and word.startswith("--") else None
            if full in banned or any(_has_option(word, opt) for opt in banned):
                return True
        return False

    def path_inside(self, text: str, option: bool = True) -> bool:
        if option and text.startswith("-"):
            if not text.startswith("--") or "=" not in text:
                return True
            text = text.split("=", 1)[1]
        norm = paths.normalize(text, self.cwd)
        return norm is not None and paths.inside_roots(norm, self.env.roots) and self.real_inside(norm)

    def real(self, norm: str | None) -> str | None:
        """Where `norm` really leads (symlinks resolved), when that differs from `norm` itself."""
        if norm is None or self.env.real_path is None:
            return None
        real = self.env.real_path(norm)
        return real if real != norm else None

    def real_inside(self, norm: str) -> bool:
        """A path inside the roots as written also leads inside them (a link in a root to / or /home does not)."""
        real = self.real(norm)
        return real is None or paths.inside_roots(real, self.env.roots)

    # -- paths

    def pieces(self, word: Word) -> list[str]:
        parts = [word.text]
        parts += [p for p in PIECE_SPLIT.split(word.text) if p and p != word.text]
        return parts

    def secret(self, text: str) -> None:
        key = (text, self.cwd)
        if key in self._secret_seen:
            return
        self._secret_seen.add(key)
        norm = paths.normalize(text, self.cwd)
        found = paths.secret_check(self.rules, text, norm, self.env.roots, "bash")
        real = self.real(norm)
        if found is None and real is not None:  # a link leading to a secret store is that store
            found = paths.secret_check(self.rules, real, real, self.env.roots, "bash")
            if found is not None:
                found = replace(found, reason=f"{text!r} leads through a symlink to {real!r}: {found.reason}")
        if found is not None:
            self.find(found)

    def read_path(self, word: Word, seg: Segment) -> None:
        norm = None if word.dynamic else paths.normalize(word.text, self.cwd)
        if norm is None or not paths.inside_roots(norm, self.env.roots) or not self.real_inside(norm):
            seg.safe = False
            seg.note = seg.note or f"reads {_short(word.raw, 60)}, outside the workspace roots"

    def write_target(self, word: Word, seg: Segment, redirect: bool = False) -> None:
        """A file the command writes: deny outside the roots or to protected files, else not safe.
        A redirection's target is not part of the text allow rules see, so it needs approval."""
        text = word.text
        if not word.dynamic and (text in paths.HARMLESS_WRITE_TARGETS or re.fullmatch(r"/dev/fd/\d+", text)):
            return
        seg.safe = False
        seg.allowable = seg.allowable and not redirect
        seg.note = seg.note or f"writes {_short(word.raw, 60)}"
        norm = None if word.dynamic or word.procsub else paths.normalize(text, self.cwd)
        if NET_DEVICE.match(text):
            self.find(deny(f"Sends data over the network through {text!r} (exfiltration or a reverse shell).",
                           "critical", "bash.reverse_shell"))
            return
        if paths.matches_any(self.rules.deny_write, text, norm, self.env.roots):
            self.find(deny(f"Writes {text!r}, a shell start-up file or SSH authorized_keys.", "critical",
                           "bash.startup_write"))
            return
        if norm is None:
            if not word.procsub:
                self.find(ask(f"Writes to `{_short(word.raw, 60)}`, a location that cannot be checked.", "medium",
                              "bash.write_unchecked"))
            return
        if paths.is_protected(norm, self.env.protected):
            self.find(deny(f"Writes to {text!r}, a protected file (approval rules, audit log).", "critical",
                           "bash.protected_path"))
        elif DEVICE.match(norm):
            self.find(deny(f"Writes to the disk device {text!r}.", "critical", "bash.disk_write"))
        elif not paths.inside_roots(norm, self.env.roots):
            self.find(deny(f"Writes outside the workspace roots: {text!r}.", "high", "bash.write_outside_roots"))
        elif not self.real_inside(norm):
            self.find(deny(f"Writes {text!r}, which leads through a symlink to {self.real(norm)!r}, outside the "
                           "workspace roots.", "high", "bash.write_outside_roots"))
        elif paths.matches_any(self.rules.ask_write, text, norm, self.env.roots):
            self.find(ask(f"Writing {text!r} can make later commands run code.", "high", "bash.exec_config"))

    # -- pipelines

    def pipe_to_interpreter(self, pipeline: Pipeline) -> None:
        for index, elem in enumerate(pipeline[1:], start=1):
            if not isinstance(elem, Command) or not _reads_script_from_stdin(elem.words, self.handlers.wrappers):
                continue
            kinds: set[str] = set()
            for upstream in pipeline[:index]:
                kinds |= self.classify_element(upstream, 0)
            if "download" in kinds:
                self.find(deny("Pipes a download into an interpreter (curl | sh).", "critical", "bash.download_exec"))
            elif "decode" in kinds:
                self.find(deny("Pipes decoded data into an interpreter (base64 -d | sh).", "critical",
                               "bash.decode_exec"))
            else:
                self.find(ask("Pipes data into an interpreter that runs it as code.", "high", "bash.pipe_to_shell"))

    def classify_sources(self, sources: list[str], depth: int) -> set[str]:
        kinds: set[str] = set()
        for source in sources:
            try:
                script = parse(source, depth)
            except ParseError:
                kinds.add("unknown")
                continue
            for pipeline in script:
                for elem in pipeline:
                    kinds |= self.classify_element(elem, depth + 1)
        return kinds

    def classify_element(self, elem: Command | Group, depth: int) -> set[str]:
        """"download" / "decode" when the element fetches or decodes data (recursively)."""
        if depth > MAX_DEPTH:
            return {"unknown"}
        if isinstance(elem, Group):
            return {k for p in elem.script for e in p for k in self.classify_element(e, depth + 1)}
        kinds: set[str] = set()
        texts = [w.text for w in elem.words]
        names = [_basename(t) for t in texts]
        if any(n in DOWNLOADERS for n in names):
            kinds.add("download")
        for i, n in enumerate(names):
            if n in DECODERS and (not DECODERS[n] or any(t in DECODERS[n] for t in texts[i + 1 :])):
                kinds.add("decode")
        for word in [*elem.words, *(r.target for r in elem.redirects)]:
            kinds |= self.classify_sources(word.subs, depth + 1)
        return kinds


def _literal_text(elem: Command | Group) -> bool:
    """The element only prints literal text (`echo hi |`, `printf 'x' |`): its output is no file's content."""
    return (isinstance(elem, Command) and bool(elem.words) and not elem.redirects
            and _basename(elem.words[0].text, exact=True) in ("echo", "printf", "true", "yes")
            and not any(w.dynamic for w in elem.words))


def _has_option(text: str, opt: str) -> bool:
    if text == opt or text.startswith(opt + "="):
        return True
    if len(opt) == 2 and opt[0] == "-" and opt[1] != "-":
        return text.startswith(opt) or bool(re.fullmatch(r"-[A-Za-z]+", text) and opt[1] in text[1:])
    return False


def _reads_script_from_stdin(words: list[Word], wrappers: set[str]) -> bool:
    """The command (possibly behind wrappers like sudo/env/timeout) is a shell or interpreter
    reading its program from stdin."""
    if not words or words[0].dynamic:
        return False
    first = _family(_basename(words[0].text))
    candidates = range(len(words)) if first in wrappers else range(1)
    for i in candidates:
        name = _family(_basename(words[i].text))
        if name in SHELLS or name in INTERPRETERS or name in ("source", "."):
            rest = [w.text for w in words[i + 1 :]]
            inline = any(r in INLINE_FLAGS or (name in SHELLS and re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", r))
                         for r in rest)
            operands = [r for r in rest if not r.startswith("-")]
            return not inline and (not operands or operands[0] in ("-", "/dev/stdin") or "-s" in rest)
    return False


