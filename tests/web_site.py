"""A small web site on 127.0.0.1 for fetch_url and web_search tests (never the internet).

Pages: /article.html (an article inside menus, a cookie banner and a footer), /loop-a <-> /loop-b
(a redirect loop), /chain/N (N redirects then a page), /to-private (redirects to 10.0.0.1), /big.html
(1 MiB of HTML), /big.pdf (a PDF over the limit the tests set), /report.pdf (a one-page PDF),
/drip (one byte a second), /image.png, /missing (404), /notes.txt, /search (a stub SearXNG JSON API;
the queries it got are in `site.queries`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

ARTICLE = """<!doctype html><html><head><meta charset="utf-8"><title>Tidal power in Brittany</title>
<script>var tracking = "should never appear";</script><style>.x{color:red}</style></head><body>
<header><a href="/">Home</a> | <a href="/news">News</a> | <a href="/about">About us</a></header>
<nav><ul><li>Politics</li><li>Sport</li><li>Weather</li></ul></nav>
<div class="cookie-banner">We use cookies. Accept all cookies to continue browsing our website today.</div>
<main><article><h1>Tidal power in Brittany</h1>
<p>The Rance tidal power station, opened in 1966 on the estuary of the Rance river in Brittany, was the
first tidal power station in the world. Its 24 turbines produce about 500 GWh a year.</p>
<p>Engineers chose the Rance because its tidal range reaches 13.5 metres, one of the highest in Europe,
and the estuary could be closed by a dam 750 metres long without flooding the towns upstream.</p>
<h2>Output</h2><p>For decades it was the largest tidal plant until Sihwa Lake in South Korea opened in 2011.</p>
<table><tr><th>Plant</th><th>Capacity</th></tr><tr><td>Rance</td><td>240 MW</td></tr>
<tr><td>Sihwa Lake</td><td>254 MW</td></tr></table>
</article></main>
<aside>Most read: ten recipes for crepes</aside>
<footer>Copyright 2024 Example News. All rights reserved. Privacy policy. Terms of use.</footer>
</body></html>"""


def make_pdf(text: str, pages: int = 1, padding: int = 0) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for number in range(pages):
        page = doc.new_page()
        page.insert_text((72, 72), f"{text} (page {number + 1})", fontsize=12)
    if padding:
        doc.set_metadata({"subject": "x" * padding})
    data: bytes = doc.tobytes()
    doc.close()
    return data


@dataclass
class Site:
    base_url: str = ""
    queries: list[dict[str, list[str]]] = field(default_factory=list)
    search_status: int = 200
    pdf: bytes = b""
    big_pdf: bytes = b""

    def url(self, path: str) -> str:
        return self.base_url + path


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def handle(self) -> None:
            with contextlib.suppress(OSError):  # the client stopped reading (a body over its limit, a timeout)
                super().handle()

        def do_GET(self) -> None:  # noqa: C901 - one branch per page
            path = urlsplit(self.path).path
            if path == "/article.html":
                self._send(200, "text/html; charset=utf-8", ARTICLE.encode())
            elif path in ("/loop-a", "/loop-b"):
                self._redirect("/loop-b" if path == "/loop-a" else "/loop-a")
            elif path.startswith("/chain/"):
                left = int(path.rsplit("/", 1)[1])
                if left:
                    self._redirect(f"/chain/{left - 1}")
                else:
                    self._send(200, "text/plain", b"end of the chain")
            elif path == "/to-private":
                self._redirect("http://10.0.0.1/secret")
            elif path == "/big.html":
                self._send(200, "text/html", b"<html><body>" + b"<p>filler text here</p>" * 50_000 + b"</body></html>")
            elif path == "/report.pdf":
                self._send(200, "application/pdf", site.pdf)
            elif path == "/big.pdf":
                self._send(200, "application/pdf", site.big_pdf)
            elif path == "/drip":
                self._drip()
            elif path == "/image.png":
                self._send(200, "image/png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 100)
            elif path == "/notes.txt":
                self._send(200, "text/plain; charset=gbk", "会议纪要：第三季度收入增长。".encode("gbk"))
            elif path == "/search":
                self._search()
            else:
                self._send(404, "text/plain", b"not found")

        def _send(self, status: int, kind: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _redirect(self, location: str) -> None:
            self.send_response(302)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _drip(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass

        def _search(self) -> None:
            query = parse_qs(urlsplit(self.path).query)
            site.queries.append(query)
            if site.search_status != 200:
                self._send(site.search_status, "text/html", b"<h1>Forbidden</h1>")
                return
            results = [{"title": f"Result {i} for {query['q'][0]}", "url": site.url(f"/r{i}"),
                        "content": f"Snippet  number {i}\n about tides.", "engine": "stub"} for i in range(12)]
            self._send(200, "application/json", json.dumps({"query": query["q"][0], "results": results}).encode())

    return Handler


@pytest.fixture
def web_site() -> Iterator[Site]:
    site = Site(pdf=make_pdf("Quarterly revenue was 4.2 million euros", pages=2),
                big_pdf=make_pdf("big", padding=300_000))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def self_signed(folder: Any) -> tuple[str, str]:
    """A certificate for 127.0.0.1 and localhost, and its key (PEM files in `folder`)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    import ipaddress

    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_file), str(key_file)


@pytest.fixture
def tls_site(tmp_path: Any) -> Iterator[tuple[str, str]]:
    """(https base URL, the certificate file a client must trust) of the same site over TLS."""
    import ssl

    cert, key = self_signed(tmp_path)
    site = Site(pdf=make_pdf("tls"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.daemon_threads = True
    site.base_url = f"https://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield site.base_url, cert
    finally:
        server.shutdown()
        server.server_close()
