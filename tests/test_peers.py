"""foundation/peers.py: the process behind a loopback connection, and whether it is one the server runs.

Real sockets and processes where it matters (this process, a child, a closed client); the parsers of
/proc/net/tcp and /proc/<pid>/stat also over random inputs written as the kernel writes them."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation import peers

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


def kernel_address(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> str:
    """As /proc/net/tcp{,6} prints it: each 32-bit word of the address as a native integer, then the port."""
    raw = address.packed
    words = "".join(f"{int.from_bytes(raw[i:i + 4], sys.byteorder):08X}" for i in range(0, len(raw), 4))
    return f"{words}:{port:04X}"


addresses = st.one_of(st.builds(ipaddress.IPv4Address, st.integers(0, 2**32 - 1)),
                      st.builds(ipaddress.IPv6Address, st.integers(0, 2**128 - 1)))
ports = st.integers(0, 65535)


@given(addresses, ports)
def test_address_reads_what_the_kernel_writes(address: Any, port: int) -> None:
    mapped = getattr(address, "ipv4_mapped", None)
    assert peers._address(kernel_address(address, port)) == (mapped or address, port)


@given(st.text(max_size=40))
def test_address_never_raises(text: str) -> None:
    peers._address(text)


def tcp_table(rows: list[tuple[Any, int, Any, int, int]]) -> str:
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    return head + "".join(
        f"{i:4}: {kernel_address(la, lp)} {kernel_address(ra, rp)} 01 00000000:00000000 00:00000000 00000000  "
        f"1000        0 {inode} 1 0000000000000000 20 4 30 10 -1\n"
        for i, (la, lp, ra, rp, inode) in enumerate(rows))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(addresses, ports, addresses, ports, st.integers(0, 10**9)), max_size=12), st.data())
def test_socket_inode_finds_the_clients_end(tmp_path_factory: Any, rows: list[Any], data: Any) -> None:
    proc = tmp_path_factory.mktemp("proc")
    (proc / "net").mkdir()
    (proc / "net" / "tcp").write_text(tcp_table([r for r in rows if r[0].version == 4]))
    (proc / "net" / "tcp6").write_text(tcp_table([r for r in rows if r[0].version == 6]))
    if not rows:
        assert peers.socket_inode(("127.0.0.1", 1), ("127.0.0.1", 2), str(proc)) is None
        return
    la, lp, ra, rp, _ = data.draw(st.sampled_from(rows))

    def key(address: Any) -> Any:
        return getattr(address, "ipv4_mapped", None) or address

    expected = next((r[4] for r in [*(r for r in rows if r[0].version == 4), *(r for r in rows if r[0].version == 6)]
                     if (key(r[0]), r[1], key(r[2]), r[3]) == (key(la), lp, key(ra), rp) and r[4] != 0), None)
    assert peers.socket_inode((str(la), lp), (str(ra), rp), str(proc)) == expected


def write_stat(proc: Path, pid: int, parent: int, name: str) -> None:
    (proc / str(pid)).mkdir(exist_ok=True)
    (proc / str(pid) / "stat").write_text(f"{pid} ({name}) S {parent} {pid} {pid} 0 -1 4194560 0 0 0 0\n")


names = st.text(st.sampled_from("ab )(x"), max_size=8)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), names), min_size=1, max_size=40), st.sets(st.integers(2, 42)),
       st.integers(2, 42))
def test_in_tree_follows_the_parents(tmp_path_factory: Any, parents: list[Any], roots: set[int], start: int) -> None:
    """A random forest (pid i+2's parent is drawn from the smaller pids, 0 or 1: no cycles), names that hold
    ") " like a hostile comm: in_tree is True exactly when a root is a strict ancestor; a missing pid: None."""
    proc = tmp_path_factory.mktemp("proc")
    parent_of = {1: 0}
    write_stat(proc, 1, 0, "init")
    for i, (draw, name) in enumerate(parents):
        pid = i + 2
        parent_of[pid] = draw % pid if draw % pid != 0 or pid == 2 else 1
        write_stat(proc, pid, parent_of[pid], name)
    if start in roots:  # a server process itself (the test's own client): not in the tree below it
        assert peers.in_tree(start, roots, str(proc)) is False
        return
    if start not in parent_of:
        assert peers.in_tree(start, roots, str(proc)) is None
        return
    ancestors, current = [], parent_of[start]
    while current > 0:
        ancestors.append(current)
        current = parent_of[current]
    expected = start not in roots and any(a in roots for a in ancestors)
    assert peers.in_tree(start, roots, str(proc)) is expected


def test_in_tree_cannot_tell_without_the_parent(tmp_path: Path) -> None:
    """A parent that is gone and not replaced: no answer (the page then refuses)."""
    write_stat(tmp_path, 3, 1, "root")
    write_stat(tmp_path, 7, 5, "child")
    assert peers.in_tree(7, {3}, str(tmp_path)) is None
    write_stat(tmp_path, 7, 3, "child")  # handed to 3 (a subreaper) as the kernel does
    assert peers.in_tree(7, {3}, str(tmp_path)) is True


@pytest.fixture
def listening() -> Any:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def test_a_client_in_this_process_is_outside(listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port)) as _:
        conn, client = listening.accept()
        started = time.perf_counter()
        assert peers.peer_of(client, ("127.0.0.1", port)) == "outside"
        assert time.perf_counter() - started < 5
        conn.close()


def test_a_client_the_server_started_is_refused_and_a_closed_one_is_unknown(listening: socket.socket) -> None:
    port = listening.getsockname()[1]
    code = (f"import socket, os, sys, time; s = socket.create_connection(('127.0.0.1', {port})); pid = os.fork();"
            "pid and print(pid, flush=True); time.sleep(60)")  # its child (a grandchild) holds the socket too
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    grandchild = int(child.stdout.readline())
    conn, client = listening.accept()
    try:
        assert peers.peer_of(client, ("127.0.0.1", port)) == "server"
        assert peers.in_tree(grandchild, {os.getpid()}) is True
    finally:
        os.kill(grandchild, signal.SIGKILL)
        child.kill()
        child.wait()
    conn.close()
    for _ in range(100):
        if peers.peer_of(client, ("127.0.0.1", port)) == "unknown":
            break
        time.sleep(0.05)
    assert peers.peer_of(client, ("127.0.0.1", port)) == "unknown"
    assert peers.peer_of(None, ("127.0.0.1", port)) == "unknown"


def test_ipv6_loopback() -> None:
    try:
        server = socket.socket(socket.AF_INET6)
        server.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with server:
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection(("::1", port)):
            conn, client = server.accept()
            assert peers.peer_of(client[:2], ("::1", port)) == "outside"
            conn.close()
