"""A small POSIX/bash lexer and parser for the policy's shell checker.

It understands what matters for deciding what a command line runs: words with quote removal
(`r''m`, `"r"m`, `\\rm`, `$'\\x72m'` all become `rm`), the operators `;`, `&&`, `||`, `|`,
`|&`, `&` and newlines, subshells `( )`, redirections, comments, and the places where code
is nested: `$( )`, backticks and process substitution `<( )` / `>( )` (their source is kept
for the caller to analyse). Heredocs become the redirection's target word (expanded like a
double-quoted string unless the delimiter is quoted). Parameter expansion (`$X`, `${X}`) and
arithmetic mark a word as dynamic. Anything it does not handle (case/function syntax, unbalanced
quotes or parentheses) raises ParseError: the caller then asks instead of guessing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_NESTING = 12


class ParseError(Exception):
    """The command line cannot be analysed with confidence."""


@dataclass
class Word:
    text: str  # the value after quote removal; expansions keep their source text ("$X")
    raw: str = ""  # the source text of the word
    dynamic: bool = False  # contains $X, ${X}, $( ), backticks or arithmetic
    glob: bool = False  # an unquoted * ? [
    brace: bool = False  # an unquoted brace expansion {a,b} / {1..3}
    tilde: bool = False  # an unquoted leading ~
    procsub: bool = False  # the word is a process substitution <( ) / >( )
    arith: bool = False  # contains $(( ))
    subs: list[str] = field(default_factory=list)  # nested command sources to analyse


@dataclass
class Redirect:
    op: str  # > >> >| &> &>> <> < <<< >& <&
    fd: str | None
    target: Word


@dataclass
class Command:
    assigns: list[Word] = field(default_factory=list)
    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)


@dataclass
class Group:
    script: list[list[Command | Group]]
    redirects: list[Redirect] = field(default_factory=list)


Element = Command | Group
Pipeline = list[Element]
Script = list[Pipeline]

_OPERATORS = ("&&", "||", "|&", ";;&", ";;", ";&", "&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>",
              "|", ";", "&", "(", ")", "<", ">", "\n")
_OPS_BY_CHAR: dict[str, tuple[str, ...]] = {
    c: tuple(op for op in _OPERATORS if op[0] == c) for c in {op[0] for op in _OPERATORS}}
_REDIRECTS = {"&>>", "&>", ">>", ">|", ">&", "<<<", "<<-", "<<", "<&", "<>", "<", ">"}
_WORD_END = set(" \t\n;&|<>()")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACE = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_FD = re.compile(r"\d+(?=[<>])")



@dataclass
class Token:
    kind: str  # "word" | "op" | "redir"
    op: str = ""
    fd: str | None = None
    word: Word | None = None


def parse(source: str, depth: int = 0) -> Script:
    """Parse a command line into pipelines of commands; raises ParseError."""
    if depth > MAX_NESTING:
        raise ParseError("nested too deeply")
    tokens = _Lexer(source).tokens()
    script, pos = _Parser(tokens, depth).script(0, closing=False)
    return script


# -- lexer -----------------------------------------------------------------------------------


class _Lexer:
    def __init__(self, s: str) -> None:
        self.s = s
        self.n = len(s)

    def tokens(self) -> list[Token]:
        s, i = self.s, 0
        out: list[Token] = []
        pending: list[tuple[Token, str, bool, bool]] = []  # heredocs waiting for their body
        while i < self.n:
            c = s[i]
            if c in " \t":
                i += 1
            elif c == "\\" and s.startswith("\\\n", i):
                i += 2
            elif c == "#":
                end = s.find("\n", i)
                i = self.n if end < 0 else end
            elif c in "<>" and s.startswith("(", i + 1):
                end = match_paren(s, i + 1)
                out.append(Token("word", word=Word(s[i : end + 1], s[i : end + 1], dynamic=True, procsub=True,
                                                   subs=[s[i + 2 : end]])))
                i = end + 1
            elif c.isdigit() and (fd := _FD.match(s, i)):
                fd_op = self._operator(fd.end()) or ">"
                out.append(Token("redir", fd_op, fd.group()))
                i = fd.end() + len(fd_op)
                if fd_op in ("<<", "<<-"):
                    i = self._heredoc_start(i, fd_op, out, pending)
            elif (op := self._operator(i)) is not None:
                if op in (";;", ";;&", ";&"):
                    raise ParseError("case statements are not analysed")
                out.append(Token("redir" if op in _REDIRECTS else "op", op))
                i += len(op)
                if op in ("<<", "<<-"):
                    i = self._heredoc_start(i, op, out, pending)
                elif op == "\n" and pending:
                    i = self._heredoc_bodies(i, pending)
            else:
                word, i = self._word(i)
                out.append(Token("word", word=word))
        if pending:  # bash reads a heredoc up to the end of input when its delimiter line is missing
            self._heredoc_bodies(self.n, pending)
        return out

    def _heredoc_start(self, i: int, op: str, out: list[Token], pending: list[tuple[Token, str, bool, bool]]) -> int:
        """After `<<`/`<<-`: read the delimiter word; the body is attached at the next newline."""
        while i < self.n and self.s[i] in " \t":
            i += 1
        if i >= self.n or self.s[i] in _WORD_END:
            raise ParseError("heredoc without a delimiter")
        word, i = self._word(i)
        if word.dynamic or not word.text:
            raise ParseError("heredoc with a computed delimiter")
        token = Token("word", word=Word("", ""))
        out.append(token)
        pending.append((token, word.text, any(q in word.raw for q in "'\"\\"), op == "<<-"))
        return i

    def _heredoc_bodies(self, i: int, pending: list[tuple[Token, str, bool, bool]]) -> int:
        """Read the bodies of the pending heredocs (in order) starting at s[i]; return the end."""
        for token, delimiter, quoted, strip_tabs in pending:
            lines: list[str] = []
            while i < self.n:
                end = self.s.find("\n", i)
                end = self.n if end < 0 else end
                line = self.s[i:end].lstrip("\t") if strip_tabs else self.s[i:end]
                i = min(end + 1, self.n)
                if line == delimiter:
                    break
                lines.append(line)
            body = "".join(line + "\n" for line in lines)
            token.word = Word(body, body) if quoted else _Lexer(body).expanding_text()
        pending.clear()
        return i

    def expanding_text(self) -> Word:
        """The whole source as the body of an unquoted heredoc: $X, $( ) and backticks expand."""
        buf: list[str] = []
        word = Word("", self.s)
        self._expand(0, buf, word, "$`\\\n", closer=None)
        word.text = "".join(buf)
        return word

    def _operator(self, i: int) -> str | None:
        candidates = _OPS_BY_CHAR.get(self.s[i]) if i < self.n else None
        return next((op for op in candidates if self.s.startswith(op, i)), None) if candidates else None

    def _word(self, i: int) -> tuple[Word, int]:
        s, start = self.s, i
        buf: list[str] = []
        unquoted: list[str] = []
        word = Word("")
        while i < self.n and s[i] not in _WORD_END:
            c = s[i]
            if c == "\\":
                if i + 1 >= self.n:
                    buf.append("\\")
                    i += 1
                elif s[i + 1] == "\n":
                    i += 2
                else:
                    buf.append(s[i + 1])
                    i += 2
            elif c == "'":
                end = s.find("'", i + 1)
                if end < 0:
                    raise ParseError("unbalanced single quote")
                buf.append(s[i + 1 : end])
                i = end + 1
            elif c == '"':
                i = self._dquote(i + 1, buf, word)
            elif c == "$":
                i = self._dollar(i, buf, word, in_dquote=False)
            elif c == "`":
                i = self._backtick(i, buf, word)
            else:
                if c in "*?[":
                    word.glob = True
                if c == "~" and i == start:
                    word.tilde = True
                buf.append(c)
                unquoted.append(c)
                i += 1
        word.text = "".join(buf)
        word.raw = s[start:i]
        word.brace = bool(_BRACE.search("".join(unquoted)))
        return word, i

    def _dquote(self, i: int, buf: list[str], word: Word) -> int:
        return self._expand(i, buf, word, '$`"\\\n', closer='"')

    def _expand(self, i: int, buf: list[str], word: Word, escapable: str, closer: str | None) -> int:
        """Expand from s[i] as inside double quotes: $..., `...`, and backslash before `escapable`
        (a backslash-newline vanishes). Returns the index after `closer`, or the end when it is None."""
        s = self.s
        while i < self.n:
            c = s[i]
            if c == closer:
                return i + 1
            if c == "\\" and i + 1 < self.n and s[i + 1] in escapable:
                if s[i + 1] != "\n":
                    buf.append(s[i + 1])
                i += 2
            elif c == "$":
                i = self._dollar(i, buf, word, in_dquote=True)
            elif c == "`":
                i = self._backtick(i, buf, word)
            else:
                buf.append(c)
                i += 1
        if closer is not None:
            raise ParseError("unbalanced double quote")
        return i

    def _dollar(self, i: int, buf: list[str], word: Word, in_dquote: bool) -> int:
        s = self.s
        nxt = s[i + 1 : i + 2]
        if nxt == "'" and not in_dquote:
            body, end = _ansi_body(s, i + 2)
            buf.append(decode_ansi_c(body))
            return end + 1
        if nxt == '"' and not in_dquote:
            return self._dquote(i + 2, buf, word)
        if s.startswith("$((", i) and match_paren(s, i + 2) == match_paren(s, i + 1) - 1:
            end = match_paren(s, i + 1)  # arithmetic $(( ... )); otherwise "$((a); b)" is a substitution
            inner = s[i + 3 : end - 1]
            if "$(" in inner or "`" in inner or "<(" in inner:
                raise ParseError("command substitution inside arithmetic")
            word.dynamic = word.arith = True
            buf.append(s[i : end + 1])
            return end + 1
        if nxt == "(":
            end = match_paren(s, i + 1)
            word.subs.append(s[i + 2 : end])
            word.dynamic = True
            buf.append(s[i : end + 1])
            return end + 1
        if nxt == "{":
            end = _match_brace(s, i + 1)
            inner = s[i + 2 : end]
            if "$(" in inner or "`" in inner or "<(" in inner or ">(" in inner:
                raise ParseError("command substitution inside ${...}")
            word.dynamic = True
            buf.append(s[i : end + 1])
            return end + 1
        if m := _NAME.match(s, i + 1):
            word.dynamic = True
            buf.append("$" + m.group())
            return m.end()
        if nxt and nxt in "@*#?$!-0123456789":
            word.dynamic = True
            buf.append(s[i : i + 2])
            return i + 2
        buf.append("$")
        return i + 1

    def _backtick(self, i: int, buf: list[str], word: Word) -> int:
        s, j, inner = self.s, i + 1, []
        while j < self.n:
            if s[j] == "\\" and j + 1 < self.n and s[j + 1] in "$`\\":
                inner.append(s[j + 1])
                j += 2
                continue
            if s[j] == "`":
                word.subs.append("".join(inner))
                word.dynamic = True
                buf.append(s[i : j + 1])
                return j + 1
            inner.append(s[j])
            j += 1
        raise ParseError("unbalanced backtick")


def match_paren(s: str, i: int, nesting: int = 0) -> int:
    """Index of the `)` matching the `(` at s[i], skipping quotes, backticks and nested substitutions."""
    return _match_close(s, i, "(", ")", nesting, backticks=True, unbalanced="unbalanced parenthesis")


def _match_brace(s: str, i: int) -> int:
    """Index of the `}` closing the `${` whose `{` is at s[i]. Quotes are skipped, backticks are not:
    a `}` inside them ends the match early, and the caller refuses any substitution inside `${...}`."""
    return _match_close(s, i, "{", "}", 0, backticks=False, unbalanced="unbalanced ${")


def _match_close(
    s: str, i: int, opener: str, closer: str, nesting: int, *, backticks: bool, unbalanced: str
) -> int:
    """Index of the `closer` matching the `opener` at s[i], skipping escapes and quoted text."""
    if nesting > MAX_NESTING * 4:
        raise ParseError("nested too deeply")
    depth, n, j = 0, len(s), i
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == "'":
            end = s.find("'", j + 1)
            if end < 0:
                raise ParseError("unbalanced single quote")
            j = end + 1
            continue
        if c == '"':
            j = _skip_dquote(s, j + 1, nesting + 1)
            continue
        if c == "`" and backticks:
            end = s.find("`", j + 1)
            if end < 0:
                raise ParseError("unbalanced backtick")
            j = end + 1
            continue
        if c == opener:
            depth += 1
        elif c == closer:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ParseError(unbalanced)


def _skip_dquote(s: str, j: int, nesting: int = 0) -> int:
    n = len(s)
    while j < n:
        c = s[j]
        if c == "\\":
            j += 2
        elif c == '"':
            return j + 1
        elif s.startswith("$(", j):
            j = match_paren(s, j + 1, nesting + 1) + 1
        else:
            j += 1
    raise ParseError("unbalanced double quote")


def _ansi_body(s: str, i: int) -> tuple[str, int]:
    j = i
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == "'":
            return s[i:j], j
        j += 1
    raise ParseError("unbalanced $'...' quote")


_ANSI_SIMPLE = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_ANSI_NUMERIC = re.compile(r"x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)", re.S)


def decode_ansi_c(body: str) -> str:
    """Decode the escapes of bash's $'...' quoting (\\x72, \\162, \\u0072, \\n, ...)."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[nxt])
            i += 2
            continue
        m = _ANSI_NUMERIC.match(body, i + 1)
        if not m:
            out.append("\\" + nxt)
            i += 2
            continue
        hex2, u4, u8, octal, ctrl = m.groups()
        if ctrl is not None:
            out.append(chr(ord(ctrl) & 0x1F))
        else:
            code = int(octal, 8) if octal else int(hex2 or u4 or u8, 16)
            out.append(chr(min(code, 0x10FFFF)))
        i = m.end()
    return "".join(out)


# -- parser ----------------------------------------------------------------------------------


class _Parser:
    def __init__(self, tokens: list[Token], depth: int) -> None:
        self.tokens = tokens
        self.depth = depth

    def script(self, pos: int, closing: bool) -> tuple[Script, int]:
        script: Script = []
        pipeline: Pipeline = []
        elem: Element | None = None
        pending = False  # after | && || a command must follow
        while pos < len(self.tokens):
            token = self.tokens[pos]
            kind, value = token.kind, token.op
            if kind == "word" and token.word is not None:
                value_word = token.word
                if isinstance(elem, Group):
                    raise ParseError("unexpected word after ( ... )")
                elem = elem or Command()
                if not elem.words and _ASSIGN.match(value_word.raw):
                    elem.assigns.append(value_word)
                else:
                    elem.words.append(value_word)
                pending = False
            elif kind == "redir":
                op, fd = token.op, token.fd
                pos += 1
                target = self.tokens[pos].word if pos < len(self.tokens) else None
                if target is None:
                    raise ParseError(f"redirection {op} without a target")
                elem = elem or Command()
                elem.redirects.append(Redirect(op, fd, target))
                pending = False
            elif value == "(":
                if elem is not None:
                    raise ParseError("function definitions and `(` after a word are not analysed")
                if self.depth + 1 > MAX_NESTING:
                    raise ParseError("nested too deeply")
                inner, pos = _Parser(self.tokens, self.depth + 1).script(pos + 1, closing=True)
                elem = Group(inner)
                pending = False
            elif value == ")":
                if not closing:
                    raise ParseError("unbalanced parenthesis")
                if pending:
                    raise ParseError("incomplete command before )")
                self._end(script, pipeline, elem)
                return script, pos
            elif value in ("|", "|&"):
                if elem is None:
                    raise ParseError(f"`{value}` without a command before it")
                pipeline.append(elem)
                elem, pending = None, True
            elif value == "\n" and (pending or (elem is None and not pipeline)):
                pass  # blank line, or a line break after | && ||
            else:  # ; & && || newline
                if elem is None and not pipeline:
                    raise ParseError(f"`{value}` without a command before it")
                if elem is None and pipeline:
                    raise ParseError(f"`{value}` right after a pipe")
                self._end(script, pipeline, elem)
                pipeline, elem = [], None
                pending = value in ("&&", "||")
            pos += 1
        if closing:
            raise ParseError("unbalanced parenthesis")
        if pending:
            raise ParseError("incomplete command (ends with an operator)")
        self._end(script, pipeline, elem)
        return script, pos

    @staticmethod
    def _end(script: Script, pipeline: Pipeline, elem: Element | None) -> None:
        if elem is not None:
            pipeline.append(elem)
        if pipeline:
            script.append(list(pipeline))
