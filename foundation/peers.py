"""Which process sent a request to the approval page (Linux): only one outside the server's own
process tree may read or decide approvals.

A shell command runs in bubblewrap, with the network shared when `bash_network` is on, so it can
connect to the page on 127.0.0.1 like the user's browser. What tells them apart is the process
tree: every sandboxed process descends from this server (bubblewrap's init, a child of the server's
bwrap, is the parent of every orphan in the sandbox's pid namespace and takes them all down when
it ends), the browser does not.

The client's end of the connection is found in /proc/net/tcp and tcp6 (its local address is the
request's client, its remote one the page's), its holders are the processes with `socket:[inode]`
among their descriptors, and each holder's parents are followed up to pid 1. Refused: a holder in
the server's tree ("server"), and, failing closed, a connection whose holder cannot be found
("unknown": a client that already closed, or a process this user may not read). The user's own
browser, curl or httpx is always found. Found "outside" means the page may answer.

The lookup reads every readable process's descriptors (a few ms on a desktop) and only runs for
requests to the approval page. On other systems there is no /proc: the sandbox itself keeps
commands from localhost (macOS: tools/sandbox.py's Seatbelt profile), and "outside" is returned.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Iterable
from typing import Literal

Peer = Literal["outside", "server", "unknown"]
PROC = "/proc"
MAX_STEPS = 4096  # parents followed from a holder (pid namespaces nest at most 32 deep, chains are short)
_tree_roots: set[int] = set()


def add_tree_root(pid: int) -> None:
    """Count the descendants of `pid` as the server's too (the supervisor of `serve --workers`: a
    command run by one worker must not use the page another worker serves)."""
    _tree_roots.add(pid)


def _address(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int] | None:
    """`0100007F:1F90` or its tcp6 form (32-bit words in host order) as (address, port)."""
    host, _, port = text.partition(":")
    try:
        raw = b"".join(int(host[i:i + 8], 16).to_bytes(4, sys.byteorder) for i in range(0, len(host), 8))
        address = ipaddress.ip_address(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw))
        return _plain(address), int(port, 16)
    except (ValueError, OSError):
        return None


def _plain(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    mapped = getattr(address, "ipv4_mapped", None)
    return mapped if mapped is not None else address


def socket_inode(client: tuple[str, int], server: tuple[str, int], proc: str = PROC) -> int | None:
    """The inode of the client's end of the TCP connection client -> server (None: none open)."""
    try:
        want_local = (_plain(ipaddress.ip_address(client[0].strip("[]"))), int(client[1]))
        want_remote = (_plain(ipaddress.ip_address(server[0].strip("[]"))), int(server[1]))
    except ValueError:
        return None
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{proc}/net/{table}", encoding="ascii", errors="replace") as lines:
                next(lines, None)  # the header
                for line in lines:
                    fields = line.split()
                    if len(fields) < 10 or fields[9] == "0":  # 0: closed (TIME_WAIT), held by no process
                        continue
                    if _address(fields[1]) == want_local and _address(fields[2]) == want_remote:
                        return int(fields[9])
        except OSError:
            continue
    return None


def holders(inode: int, proc: str = PROC) -> list[int]:
    """The processes whose descriptors this user may read and that hold `socket:[inode]`."""
    target = f"socket:[{inode}]"
    found = []
    for name in os.listdir(proc):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir(f"{proc}/{name}/fd")
        except OSError:  # gone, or not ours to read
            continue
        for fd in fds:
            try:
                if os.readlink(f"{proc}/{name}/fd/{fd}") == target:
                    found.append(int(name))
                    break
            except OSError:
                continue
    return found


def _parent(pid: int, proc: str) -> int | None:
    try:
        with open(f"{proc}/{pid}/stat", "rb") as stat:
            text = stat.read()
        return int(text[text.rindex(b")") + 2:].split()[1])  # after the name (which may hold ") "): state, ppid
    except (OSError, ValueError, IndexError):
        return None


def in_tree(pid: int, roots: Iterable[int], proc: str = PROC) -> bool | None:
    """Whether `pid` descends from one of `roots` (not being one itself); None: it is gone. A parent that
    ends meanwhile is skipped: its child is read again (it now has the parent it was handed to)."""
    tops = set(roots)
    chain = [pid]
    for _ in range(MAX_STEPS):
        current = chain[-1]
        if current in tops:
            return current != pid
        parent = _parent(current, proc)
        if parent is None:  # ended while we looked
            chain.pop()
            if not chain:
                return None
            continue
        if parent <= 0 or current == 1:
            return False
        chain.append(parent)
    return None


def peer_of(client: tuple[str, int] | None, server: tuple[str, int] | None, proc: str = PROC) -> Peer:
    """Where the connection `client` -> `server` comes from (see the module's docstring)."""
    if not sys.platform.startswith("linux"):
        return "outside"
    if client is None or server is None:
        return "unknown"
    inode = socket_inode(client, server, proc)
    if inode is None:
        return "unknown"
    found = holders(inode, proc)
    tops = {os.getpid(), *_tree_roots}
    verdicts = [in_tree(pid, tops, proc) for pid in found]
    if any(verdicts):
        return "server"
    if not verdicts or None in verdicts:
        return "unknown"
    return "outside"
