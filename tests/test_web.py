"""fetch_url and web_search against a local site on 127.0.0.1 (tests/web_site.py), through the SDK's client
and our server, and from a sub-agent whose model is the scripted endpoint. Loopback is reached only
because these tests allow 127.0.0.0/8 (GENERALAGENT_WEB_ALLOW_NETWORKS); the default refuses it."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import approval_helpers as helpers
from tests.conftest import connect
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_delegate import allow_tools, client_for, tool_names
from tests.web_site import Site, tls_site, web_site  # noqa: F401  (fixtures)
from tools.web_fetch import address_allowed, networks
from tools.web_html import html_to_markdown, stdlib_markdown

pytestmark = pytest.mark.anyio
LOOPBACK = ["127.0.0.0/8"]
LONG = "The Rance tidal power station in Brittany opened in 1966 and produces about 500 GWh a year. " * 3


@pytest.fixture
def web_settings(make_settings: Any, web_site: Site) -> Any:  # noqa: F811
    return make_settings(web_fetch_enabled=True, web_allow_networks=LOOPBACK, web_max_bytes=64 * 1024,
                         web_timeout_seconds=3, web_max_redirects=4, web_search_url=web_site.url(""))


async def fetch(settings: Any, **args: Any) -> Any:
    async with connect(settings) as client:
        return await client.call_tool("fetch_url", args)


def error_text(result: Any) -> str:
    """The error the client sees, without the SDK's "Error executing tool <name>: " prefix."""
    assert result.is_error, result.structured_content
    text = str(result.content[0].text)
    return text.split(": ", 1)[1] if text.startswith("Error executing tool ") else text


async def test_an_article_is_readable_text_without_boilerplate(web_settings: Any, web_site: Site) -> None:  # noqa: F811
    result = await fetch(web_settings, url=web_site.url("/article.html"))
    assert not result.is_error, result.content
    page = result.structured_content
    text = page["text"]
    assert page["title"] == "Tidal power in Brittany" and page["content_type"] == "text/html"
    assert "first tidal power station in the world" in text and "13.5 metres" in text and "Sihwa Lake" in text
    for boilerplate in ("should never appear", "Accept all cookies", "All rights reserved", "Politics", "crepes"):
        assert boilerplate not in text, boilerplate
    assert page["extractor"] in ("trafilatura", "html.parser") and page["truncated"] is False


async def test_paging_through_a_long_text(web_settings: Any, web_site: Site) -> None:  # noqa: F811
    first = (await fetch(web_settings, url=web_site.url("/article.html"), max_chars=500)).structured_content
    second = (await fetch(web_settings, url=web_site.url("/article.html"), offset=first["next_offset"],
                          max_chars=500)).structured_content
    assert len(first["text"]) == 500 and second["offset"] == 500
    assert first["text"] + second["text"] == (await fetch(web_settings, url=web_site.url("/article.html"))
                                              ).structured_content["text"][:len(first["text"]) + len(second["text"])]


async def test_redirects_are_followed_and_bounded(web_settings: Any, web_site: Site) -> None:  # noqa: F811
    ok = (await fetch(web_settings, url=web_site.url("/chain/3"))).structured_content
    assert ok["text"] == "end of the chain" and ok["redirects"][-1].endswith("/chain/0") and len(ok["redirects"]) == 3
    loop = error_text(await fetch(web_settings, url=web_site.url("/loop-a")))
    assert loop.startswith(f"Redirect loop: {web_site.url('/loop-a')} redirects back to an address already visited")
    many = error_text(await fetch(web_settings, url=web_site.url("/chain/9")))
    assert many.startswith("More than 4 redirects (last to ") and "(GENERALAGENT_WEB_MAX_REDIRECTS)" in many
    private = error_text(await fetch(web_settings, url=web_site.url("/to-private")))
    assert private.startswith("10.0.0.1 is a private, loopback or otherwise non-public address (10.0.0.1)")


async def test_loopback_is_refused_unless_allowed(make_settings: Any, web_site: Site) -> None:  # noqa: F811
    settings = make_settings(web_fetch_enabled=True)
    for host in ("127.0.0.1", "localhost"):  # a name is checked by the address it resolves to
        url = web_site.url("/article.html").replace("127.0.0.1", host)
        message = error_text(await fetch(settings, url=url))
        assert message.startswith(f"{host} is a private, loopback or otherwise non-public address ("), message
        assert "GENERALAGENT_WEB_ALLOW_NETWORKS" in message
    off = error_text(await fetch(make_settings(), url=web_site.url("/article.html")))
    assert off.startswith("fetch_url is off: it reaches the network. To turn it on, set GENERALAGENT_WEB_FETCH_ENABLED=1")


@pytest.mark.slow  # waits out a 3 s time limit
async def test_sizes_times_and_types_are_bounded(web_settings: Any, web_site: Site) -> None:  # noqa: F811
    big = (await fetch(web_settings, url=web_site.url("/big.html"))).structured_content
    assert big["truncated"] is True and "filler text here" in big["text"] and big["total_chars"] < 64 * 1024
    big_pdf = error_text(await fetch(web_settings, url=web_site.url("/big.pdf")))
    assert "is a PDF file of " in big_pdf and "over the 0.1 MiB limit (GENERALAGENT_WEB_MAX_BYTES)" in big_pdf
    drip = error_text(await fetch(web_settings, url=web_site.url("/drip")))
    assert drip == f"{web_site.url('/drip')} did not load within 3 s (GENERALAGENT_WEB_TIMEOUT_SECONDS)."
    image = error_text(await fetch(web_settings, url=web_site.url("/image.png")))
    assert "is image/png (108 bytes read): fetch_url reads web pages, text, JSON, PDF, Office, OpenDocument and EPUB files." in image
    missing = error_text(await fetch(web_settings, url=web_site.url("/missing")))
    assert missing == f"GET {web_site.url('/missing')} answered HTTP 404 Not Found."
    scheme = error_text(await fetch(web_settings, url="file:///etc/passwd"))
    assert scheme.startswith("Only http and https URLs are fetched, not file")


async def test_pdfs_and_text_go_through_our_extractors(web_settings: Any, web_site: Site) -> None:  # noqa: F811
    pdf = (await fetch(web_settings, url=web_site.url("/report.pdf"))).structured_content
    assert pdf["extractor"] == "document" and pdf["content_type"] == "application/pdf"
    assert "## Page 1" in pdf["text"] and "Quarterly revenue was 4.2 million euros (page 2)" in pdf["text"]
    notes = (await fetch(web_settings, url=web_site.url("/notes.txt"))).structured_content
    assert notes["text"] == "会议纪要：第三季度收入增长。"  # the declared charset (GBK) is honoured


async def test_web_search_uses_the_searxng_json_api(web_settings: Any, web_site: Site, make_settings: Any) -> None:  # noqa: F811
    async with connect(web_settings) as client:
        result = await client.call_tool("web_search", {"query": "tidal power", "max_results": 3, "language": "en"})
        web_site.search_status = 403
        refused = await client.call_tool("web_search", {"query": "tidal power"})
    data = result.structured_content
    assert [hit["title"] for hit in data["results"]] == [f"Result {i} for tidal power" for i in range(3)]
    assert data["results"][0]["snippet"] == "Snippet number 0 about tides." and data["next_page"] == 2
    assert web_site.queries[0] == {"q": ["tidal power"], "format": ["json"], "pageno": ["1"], "language": ["en"]}
    assert error_text(refused).startswith("The search endpoint failed: GET ")
    assert "json is not in search.formats" in error_text(refused)
    async with connect(make_settings()) as client:
        off = await client.call_tool("web_search", {"query": "x"})
    assert error_text(off).startswith("web_search is off: no search endpoint. Set GENERALAGENT_WEB_SEARCH_URL")


async def test_a_subagent_searches_and_reads_the_web(make_settings: Any, fake_llm: FakeLLM, data_dir: Path,  # noqa: F811
                                                    web_site: Site) -> None:  # noqa: F811
    allow_tools(data_dir, "delegate_task", "web_search", "fetch_url")  # the user trusts a sub-agent's web calls
    fake_llm.reply_tool_calls([("web_search", {"query": "Rance tidal"}),
                               ("fetch_url", {"url": web_site.url("/article.html")})])
    fake_llm.reply_text(LONG)
    settings = make_settings(**fake_llm.settings_overrides(), web_fetch_enabled=True, web_allow_networks=LOOPBACK,
                             web_search_url=web_site.url(""))
    async with client_for(settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "When did the Rance tidal plant open?"})
    assert not result.is_error, result.content
    assert {"fetch_url", "web_search"} <= set(tool_names(fake_llm.requests[0]))  # on: offered by default
    found, page = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "Result 0 for Rance tidal" in found and "opened in 1966" in page and "Accept all cookies" not in page


async def test_a_subagents_web_calls_ask_by_default(make_settings: Any, fake_llm: FakeLLM, data_dir: Path,  # noqa: F811
                                                    web_site: Site) -> None:  # noqa: F811
    """A prompt-injected sub-agent could carry data out in a URL: its fetch_url asks (the client's does not)."""
    allow_tools(data_dir, "delegate_task")
    leak = web_site.url("/article.html?q=the-secret")
    fake_llm.reply_tool_calls([("fetch_url", {"url": leak})])
    fake_llm.reply_text(LONG)
    seen: list[str] = []
    settings = make_settings(**fake_llm.settings_overrides(), web_fetch_enabled=True, web_allow_networks=LOOPBACK)
    async with client_for(settings, elicitation_callback=helpers.elicitation_answer("decline", seen=seen)) as (
            client, _):
        result = await client.call_tool("delegate_task", {"task": "Summarise the article."})
        direct = await client.call_tool("fetch_url", {"url": web_site.url("/article.html")})
    assert not result.is_error, result.content
    assert len(seen) == 1 and "fetch_url" in seen[0] and "default.subagent.ask[0]" in seen[0]
    refused = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert refused.startswith("Error:") and "did not approve" in refused, refused  # never fetched
    assert not direct.is_error and len(seen) == 1  # the client's own call is not asked


async def test_rules_can_name_fetch_url(web_settings: Any, web_site: Site, data_dir: Path) -> None:  # noqa: F811
    (data_dir / "policy.toml").write_text(f'version = 1\n[permissions]\ndeny = ["fetch_url({web_site.url("/loop")}*)"]\n')
    denied = error_text(await fetch(web_settings, url=web_site.url("/loop-a")))
    assert "Denied by policy" in denied or "denied" in denied.lower()


def test_the_stdlib_converter_keeps_structure_and_drops_boilerplate() -> None:
    from tests.web_site import ARTICLE

    text = stdlib_markdown(ARTICLE)
    assert text.startswith("We use cookies") or text.startswith("# Tidal power in Brittany")
    assert "# Tidal power in Brittany" in text and "## Output" in text and "| Rance | 240 MW |" in text
    for boilerplate in ("should never appear", "All rights reserved", "Politics", "crepes", ".x{color"):
        assert boilerplate not in text
    assert html_to_markdown("<html><title> A  &amp; B </title><body><p>x</p></body></html>")[1] == "A & B"


@given(st.text(max_size=300))
def test_the_stdlib_converter_takes_any_text(html: str) -> None:
    out = stdlib_markdown(html)
    assert isinstance(out, str) and "<script" not in out.lower() or "<script" in html.lower()


@given(st.ip_addresses())
def test_only_public_addresses_unless_allowed(address: Any) -> None:
    plain = address.ipv4_mapped if getattr(address, "ipv4_mapped", None) is not None else address
    assert address_allowed(address, ()) == (plain.is_global and not plain.is_multicast)
    assert address_allowed(address, networks(("0.0.0.0/0", "::/0")))
    if plain in ipaddress.ip_network("127.0.0.0/8"):
        assert not address_allowed(address, ()) and address_allowed(address, networks(("127.0.0.0/8",)))


async def test_https_checks_the_certificate(make_settings: Any, tls_site: tuple[str, str],  # noqa: F811
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    base, cert = tls_site
    settings = make_settings(web_fetch_enabled=True, web_allow_networks=LOOPBACK, web_timeout_seconds=10)
    untrusted = error_text(await fetch(settings, url=base + "/article.html"))
    assert untrusted.startswith("TLS with 127.0.0.1 failed (") and "CERTIFICATE_VERIFY_FAILED" in untrusted
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # OpenSSL's default trust store: now the test's certificate
    for host in ("127.0.0.1", "localhost"):  # the name is checked against the certificate, not the address
        page = await fetch(settings, url=base.replace("127.0.0.1", host) + "/article.html")
        assert not page.is_error, page.content
        assert "first tidal power station" in page.structured_content["text"]


def test_the_address_checked_is_the_address_connected_to(web_site: Site, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """A name is resolved once per connection; every answer is checked and the socket goes to a checked one
    (a DNS answer that changes between a check and the connection cannot reach a refused address)."""
    import socket

    from foundation.errors import WebError
    from tools.web_fetch import open_socket

    port = int(web_site.base_url.rsplit(":", 1)[1])
    answers = [[("10.0.0.5", port), ("127.0.0.1", port)]]
    resolved: list[str] = []

    def getaddrinfo(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        resolved.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", addr) for addr in answers[0]]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    sock = open_socket("rebind.example", port, 5, networks(("127.0.0.0/8",)))
    with sock:
        assert sock.getpeername() == ("127.0.0.1", port)  # 10.0.0.5 was refused, never tried
    assert resolved == ["rebind.example"]
    with pytest.raises(WebError, match=r"rebind.example is a private, loopback .* \(10.0.0.5, 127.0.0.1\)"):
        open_socket("rebind.example", port, 5, ())


@given(st.text(max_size=80))
def test_any_url_is_checked_or_refused_with_a_reason(text: str) -> None:
    from foundation.errors import InvalidInput
    from tools.web_fetch import check_url

    try:
        scheme, host, port, path = check_url(text)
    except InvalidInput as exc:
        assert str(exc)
    else:
        assert scheme in ("http", "https") and host and 0 <= port < 65536 and path.startswith("/")
