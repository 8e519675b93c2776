"""One bounded HTTP GET with redirects, for fetch_url and web_search. Plain library code (stdlib http.client).

Guarantees, by construction:
- only http and https, no credentials in the URL;
- the address checked is the address connected to: the host is resolved once per connection, every
  address it resolves to is checked, and the socket is opened to a checked address (a DNS answer that
  changes between a check and the connection cannot reach a private address: no DNS rebinding);
- private, loopback, link-local, shared and reserved addresses are refused unless a configured network
  holds them (`allow`), and so is every redirect target;
- at most `max_redirects` redirects, a loop is named; one deadline for the whole fetch (each read
  waits at most the time left; a server that drips bytes is stopped at the deadline);
- at most `max_bytes` of body are read; no compression is asked for (no decompression bombs); no
  proxy from the environment is used.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from foundation.errors import Cancelled, InvalidInput, LimitExceeded, WebError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
REDIRECTS = frozenset({301, 302, 303, 307, 308})
CHUNK = 64 * 1024
USER_AGENT = "generalagent-mcp (fetch_url; +https://modelcontextprotocol.io)"


@dataclass(frozen=True)
class FetchLimits:
    max_bytes: int
    timeout_seconds: float
    max_redirects: int
    allow: tuple[Network, ...] = ()  # private/loopback networks that may be reached anyway
    accept: str = "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,*/*;q=0.5"


@dataclass
class Fetched:
    url: str  # after redirects
    status: int
    content_type: str  # lower case, without parameters
    charset: str | None
    body: bytes
    truncated: bool  # the body was longer than max_bytes: only its start was read
    declared_length: int | None
    redirects: list[str] = field(default_factory=list)


def networks(texts: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(text, strict=False) for text in texts)


def check_url(url: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path with query) of an http(s) URL; InvalidInput names what is wrong."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"Not a valid URL: {url[:200]!r} ({exc}).") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput(f"Only http and https URLs are fetched, not {parts.scheme or 'a URL without a scheme'}: "
                           f"{url[:200]!r}. Write the full URL, e.g. https://example.com/page.")
    if not parts.hostname:
        raise InvalidInput(f"The URL {url[:200]!r} has no host.")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput("URLs with a user name or password (user:pass@host) are not fetched.")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path


def address_allowed(address: IPAddress, allow: tuple[Network, ...]) -> bool:
    """A public address, or one inside a network the settings allow."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address in network for network in allow if network.version == address.version):
        return True
    return address.is_global and not address.is_multicast


def open_socket(host: str, port: int, timeout: float, allow: tuple[Network, ...]) -> socket.socket:
    """A TCP connection to an allowed address of `host` (the very address that was checked)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WebError(f"Cannot resolve the host {host!r} ({exc.strerror or exc}). Check the URL.") from None
    refused: list[str] = []
    failure: OSError | None = None
    for family, kind, proto, _, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not address_allowed(address, allow):
            refused.append(str(address))
            continue
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            failure = exc
    if failure is not None:
        raise WebError(f"Cannot connect to {host}:{port} ({failure}).")
    raise WebError(f"{host} is a private, loopback or otherwise non-public address ({', '.join(refused[:3])}); "
                   "fetch_url reaches only public addresses. To allow a local network, add it to "
                   "GENERALAGENT_WEB_ALLOW_NETWORKS (e.g. 192.168.1.0/24) and restart the server.")


class _Connection(http.client.HTTPConnection):
    """http.client over a socket from `open_socket` (TLS with certificate checks for https)."""

    def __init__(self, host: str, port: int, timeout: float, allow: tuple[Network, ...],
                 tls: ssl.SSLContext | None) -> None:
        super().__init__(host, port, timeout=timeout)
        self._allow, self._tls = allow, tls

    def connect(self) -> None:
        sock = open_socket(self.host, self.port, float(self.timeout or 30), self._allow)
        if self._tls is None:
            self.sock = sock
            return
        try:
            self.sock = self._tls.wrap_socket(sock, server_hostname=self.host)
        except (ssl.SSLError, OSError) as exc:
            sock.close()
            raise WebError(f"TLS with {self.host} failed ({exc}).") from None


def fetch(url: str, limits: FetchLimits, should_cancel: Callable[[], bool] | None = None) -> Fetched:
    """GET `url`, following up to max_redirects redirects. Raises InvalidInput, WebError, LimitExceeded."""
    deadline = time.monotonic() + limits.timeout_seconds
    redirects: list[str] = []
    seen = {url}
    while True:
        fetched = _get_once(url, limits, deadline, should_cancel)
        if isinstance(fetched, Fetched):
            fetched.redirects = redirects
            return fetched
        target = urljoin(url, fetched)
        if target in seen:
            raise WebError(f"Redirect loop: {target[:200]} redirects back to an address already visited "
                           f"({len(redirects) + 1} redirects). The page cannot be fetched.")
        if len(redirects) >= limits.max_redirects:
            raise WebError(f"More than {limits.max_redirects} redirects (last to {target[:200]}); not followed "
                           "(GENERALAGENT_WEB_MAX_REDIRECTS).")
        redirects.append(target)
        seen.add(target)
        url = target


def _get_once(url: str, limits: FetchLimits, deadline: float,
              should_cancel: Callable[[], bool] | None) -> Fetched | str:
    """The response to one GET, or the Location it redirects to."""
    scheme, host, port, path = check_url(url)
    tls = ssl.create_default_context() if scheme == "https" else None
    conn = _Connection(host, port, _left(deadline, limits, url), limits.allow, tls)
    try:
        try:
            conn.request("GET", path, headers={"User-Agent": USER_AGENT, "Accept": limits.accept,
                                               "Accept-Encoding": "identity"})
            response = conn.getresponse()
        except TimeoutError:
            raise _timeout(limits, url) from None
        except (OSError, http.client.HTTPException) as exc:
            raise WebError(f"GET {url[:200]} failed ({exc or type(exc).__name__}).") from None
        if response.status in REDIRECTS and response.getheader("Location"):
            return str(response.getheader("Location"))
        if response.status >= 400:
            raise WebError(f"GET {url[:200]} answered HTTP {response.status} {response.reason}.")
        return _read(response, url, limits, deadline, conn, should_cancel)
    finally:
        conn.close()


def _read(response: http.client.HTTPResponse, url: str, limits: FetchLimits, deadline: float,
          conn: _Connection, should_cancel: Callable[[], bool] | None) -> Fetched:
    declared = _int(response.getheader("Content-Length"))
    body = bytearray()
    truncated = False
    while True:
        if should_cancel is not None and should_cancel():
            raise Cancelled("The web request was cancelled.")
        if conn.sock is not None:
            conn.sock.settimeout(_left(deadline, limits, url))
        try:
            chunk = response.read1(CHUNK)
        except TimeoutError:
            raise _timeout(limits, url) from None
        except (OSError, http.client.HTTPException) as exc:
            raise WebError(f"Reading {url[:200]} failed ({exc or type(exc).__name__}).") from None
        if not chunk:
            break
        body += chunk
        if len(body) > limits.max_bytes:
            del body[limits.max_bytes:]
            truncated = True
            break
    content_type, charset = _content_type(response.getheader("Content-Type") or "")
    return Fetched(url, response.status, content_type, charset, bytes(body), truncated, declared)


def _left(deadline: float, limits: FetchLimits, url: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise _timeout(limits, url)
    return left


def _timeout(limits: FetchLimits, url: str) -> LimitExceeded:
    return LimitExceeded(f"{url[:200]} did not load within {limits.timeout_seconds:g} s "
                         "(GENERALAGENT_WEB_TIMEOUT_SECONDS).")


def _content_type(header: str) -> tuple[str, str | None]:
    kind, _, rest = header.partition(";")
    charset = None
    for param in rest.split(";"):
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"').lower()
    return kind.strip().lower(), charset


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
