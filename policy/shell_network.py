"""Shell-checker handlers for commands that talk to the network: downloads (what they write),
uploads of files to other hosts (exfiltration: denied by default), and reverse shells (denied).

Loopback destinations (localhost, 127.0.0.0/8, ::1) are local development, not exfiltration: those
calls ask like any other non-safe command.
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from policy.model import deny
from policy.shell_scan import DECIDED, Args, Handlers, Scanner, Segment, value_word
from policy.shell_syntax import Command, Word

HANDLERS = Handlers()
handles = HANDLERS.handles

_CURL_OUTPUTS = ("-o", "--output", "--output-dir")
_WGET_OUTPUTS = ("-O", "--output-document", "-P", "--directory-prefix", "-o", "--output-file", "-a", "--append-output")
_CURL_DATA = frozenset({"-d", "--data", "--data-binary", "--data-raw", "--data-urlencode", "--data-ascii", "--json"})
_CURL_FORM = frozenset({"-F", "--form"})
_CURL_UPLOAD = frozenset({"-T", "--upload-file"})
_WGET_UPLOAD = frozenset({"--post-file", "--body-file"})
_CURL_SHORT_VALUE = "dFTouHXAeEKrwYyzbcCmQPx"  # curl short options that take a value (the rest of a bundle)
_REMOTE = re.compile(r"^(?:[\w.+-]+@)?(\[[^\]]+\]|[\w.-]+):")  # scp/rsync "[user@]host:path"


def is_loopback_host(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost.localdomain", "ip6-localhost") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _hosts(words: list[str]) -> list[str]:
    """Destination hosts named in URLs (or bare host words when there is no URL)."""
    urls = [w for w in words if "://" in w]
    if urls:
        return [urlsplit(u).hostname or "" for u in urls]
    return [urlsplit("//" + w).hostname or "" for w in words if w and not w.startswith("-") and not w.isdigit()]


def _remote(hosts: list[str]) -> bool:
    return not hosts or not all(is_loopback_host(h) for h in hosts)


def _options(args: Args, short_values: str) -> list[tuple[str, Word | None]]:
    """(option, value word) pairs: `--opt=v`, `--opt v`, `-xv`, `-x v`, bundles `-sSd @f`."""
    out: list[tuple[str, Word | None]] = []
    i = 0
    while i < len(args):
        word, text = args[i], args[i].text
        nxt = args[i + 1] if i + 1 < len(args) else None
        if text.startswith("--") and "=" in text:
            name, value = text.split("=", 1)
            out.append((name, value_word(word, value)))
        elif text.startswith("--"):
            out.append((text, nxt))
        elif text.startswith("-") and len(text) > 1:
            for j, char in enumerate(text[1:], start=1):
                if char in short_values:
                    rest = text[j + 1 :]
                    out.append(("-" + char, value_word(word, rest) if rest else nxt))
                    break
                out.append(("-" + char, None))
        i += 1
    return out


def _sends_file(option: str, value: Word | None, an: Scanner, tool: str) -> bool:
    """Whether this option uploads a file, stdin or computed data."""
    if value is None:
        return False
    text = value.text
    if tool == "wget":
        return option in _WGET_UPLOAD
    if option in _CURL_UPLOAD:
        return True
    if option in _CURL_DATA:
        return text.startswith("@") or value.dynamic
    if option in _CURL_FORM:
        return bool(re.search(r"=[@<]", text)) or value.dynamic
    return False


@handles("curl", "wget")
def _transfer(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    outputs = _CURL_OUTPUTS if name == "curl" else _WGET_OUTPUTS
    uploads = False
    for option, value in _options(args, _CURL_SHORT_VALUE if name == "curl" else "oOPa"):
        if option in outputs and value is not None:
            an.write_target(value, seg)
        uploads = uploads or _sends_file(option, value, an, name)
    if uploads and _remote(_hosts([w.text for w in args if "://" in w.text])):
        an.find(deny(f"{name} uploads a file or command output to another host (exfiltration).", "critical",
                     "bash.exfiltration"))
    return DECIDED


@handles("nc", "ncat", "netcat", "socat", "telnet", "ssh", "openssl")
def _socket(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    texts = [w.text for w in args]
    if name == "openssl" and (not texts or texts[0] != "s_client"):
        return None
    if name in ("nc", "ncat", "netcat") and any(t in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec")
                                                or re.fullmatch(r"-[a-zA-Z]*[ec][a-zA-Z]*", t) for t in texts):
        an.find(deny(f"{name} -e/-c connects a shell to the network (reverse shell).", "critical", "bash.reverse_shell"))
    elif name == "socat" and any(re.match(r"(?i)(exec|system):", t) for t in texts):
        an.find(deny("socat EXEC/SYSTEM connects a program to the network (reverse shell).", "critical",
                     "bash.reverse_shell"))
    elif an.piped and _remote(_hosts([t for t in texts if not t.startswith("-")][: 1 if name == "ssh" else None])):
        an.find(deny(f"Sends data to another host with {name} (exfiltration).", "critical", "bash.exfiltration"))
    return DECIDED


def remote_destination(dest: Word) -> bool:
    """scp/rsync: the destination is another host (`host:path`, `user@host:path`, `rsync://`)."""
    text = dest.text
    if text.startswith("rsync://"):
        return _remote(_hosts([text]))
    m = _REMOTE.match(text)
    return m is not None and "/" not in m.group(1) and not is_loopback_host(m.group(1))


__all__ = ["HANDLERS", "is_loopback_host", "remote_destination"]
