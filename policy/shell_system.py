"""Shell-checker handlers for commands that act on the whole system: killing every process, and
containers that get the host (privileged, host namespaces, the host's root or docker socket mounted).
Both are denied by default; other uses of these commands ask as usual."""

from __future__ import annotations

import re

from policy import paths
from policy.model import deny
from policy.shell_scan import Args, Handlers, Scanner, Segment
from policy.shell_syntax import Command

HANDLERS = Handlers()
handles = HANDLERS.handles

_SIGNAL = re.compile(r"-(\d+|[A-Z][A-Z0-9+-]*|SIG[A-Z0-9+-]+)", re.IGNORECASE)
HOST_MOUNTS = frozenset({"/", "/etc", "/root", "/home", "/var", "/usr", "/boot", "/proc", "/sys", "/dev", "/bin",
                         "/sbin", "/lib", "/var/run/docker.sock", "/run/docker.sock", "/run", "/var/run",
                         "/Users", "/private", "/System"})
_HOST_NS = re.compile(r"--(pid|ipc|uts|userns|cgroupns)(=|$)")
_CAPS = re.compile(r"(?i)(all|sys_admin|sys_module|sys_ptrace|sys_rawio|dac_read_search|dac_override|bpf|net_admin)$")
_UNCONFINED = re.compile(r"(?i)(seccomp|apparmor|systempaths)[=:]unconfined|label[=:]disable|no-new-privileges[=:]false")


@handles("kill", "killall5", "pkill", "killall")
def _kill(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    if name == "killall5" or (name == "kill" and _targets_everything([w.text for w in args])):
        an.find(deny(f"`{name}` would kill every process you can reach (or init).", "critical", "bash.kill_all"))
    return None


def _targets_everything(words: list[str]) -> bool:
    i = 0
    if words[:1] and words[0] in ("-s", "-n", "--signal") and len(words) > 1:
        i = 2
    elif words[:1] and (_SIGNAL.fullmatch(words[0]) and words[0] != "-1" or words[0].startswith("--signal=")):
        i = 1
    elif len(words) > 1 and words[0] == "-1":
        i = 1  # `kill -1 PID`: SIGHUP; `kill -1` alone or `kill -9 -1`: every process
    targets = [w for w in words[i:] if w != "--"]
    return any(t in ("-1", "1") for t in targets)


@handles("docker", "podman", "nerdctl", "lima", "finch")
def _container(an: Scanner, name: str, args: Args, depth: int, seg: Segment, cmd: Command | None) -> object:
    seg.safe = False
    texts = [w.text for w in args]
    if not any(t in ("run", "create", "exec") for t in texts[:3]):
        return None
    why = _host_access(texts)
    if why:
        an.find(deny(f"{name} {why}: the container gets the host.", "critical", "bash.privileged_container"))
    return None


def _host_access(texts: list[str]) -> str:
    for i, text in enumerate(texts):
        nxt = texts[i + 1] if i + 1 < len(texts) else ""
        name, _, value = text.partition("=")
        if name == "--privileged" and value.lower() not in ("false", "0"):
            return "--privileged"
        if _HOST_NS.match(text) and (value or nxt) == "host":
            return f"{name}=host"
        if name == "--cap-add" and _CAPS.match(value or nxt):
            return f"--cap-add {value or nxt}"
        if name == "--security-opt" and _UNCONFINED.search(value or nxt):
            return "--security-opt unconfined"
        mount = _mount_source(name, value, nxt, text)
        if mount is not None and _host_path(mount):
            return f"mounts {mount}"
    return ""


def _mount_source(name: str, value: str, nxt: str, text: str) -> str | None:
    if name in ("-v", "--volume"):
        return (value or nxt).split(":", 1)[0]
    if re.fullmatch(r"-v.+", text):
        return text[2:].lstrip("=").split(":", 1)[0]
    if name == "--mount":
        found = re.search(r"(?:^|,)(?:source|src)=([^,]+)", value or nxt)
        return found.group(1) if found else None
    return None


def _host_path(source: str) -> bool:
    if source in ("~", "$HOME", "${HOME}") or source.startswith(("~/", "$HOME/")) and source.count("/") == 1:
        return True
    norm = paths.normalize(source, None)
    return norm is not None and (norm in HOST_MOUNTS or bool(re.fullmatch(r"/(home|Users)/[^/]+", norm)))


__all__ = ["HANDLERS"]
