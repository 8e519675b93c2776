"""The local approval page on the Streamable HTTP app: GET/POST /approvals/<id>.

Only for requests from a loopback address with a loopback Host (DNS rebinding), carrying the page's key
(page_key.py: a secret only the person is given, kept by their browser in a cookie; a sandboxed command
behind a TCP relay cannot have it), sent by a process outside the server's own process tree
(foundation/peers.py: not a shell command the server runs, even with the network shared into its
sandbox) and, on POST, a same-origin (or absent) Origin header and the CSRF token bound to that pending
approval.
The page shows the exact call, its risk and reason; the human approves or rejects it.
"""

from __future__ import annotations

import hmac
import html
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from foundation.command import cli_command
from foundation.errors import GeneralAgentError
from foundation.peers import peer_of
from mcp_server import approval_keys as page_key
from mcp_server.approval.store import SCOPES, scope_choices

_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'",
}
_STYLE = ("body{font-family:system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}"
          "pre{background:#f4f4f4;padding:1rem;overflow:auto;white-space:pre-wrap}"
          "button{font-size:1rem;padding:.5rem 1.2rem;margin-right:1rem}")


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    text = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
    return HTMLResponse(text, status_code=status, headers=_HEADERS)


def _loopback_request(request: Request) -> bool:
    from mcp_server.transports import is_loopback, parse_authority

    client = request.client.host if request.client else ""
    host = parse_authority(request.headers.get("host", ""))
    return is_loopback(client) and host is not None and is_loopback(host[0])


async def _refusal(request: Request, settings: Any) -> Response | None:
    """The page refused to this request (None: it may be answered): not from this computer, or
    from a process the server started (a sandboxed shell command) or one it cannot tell."""
    if not _loopback_request(request):
        return _page("Forbidden", "<p>The approval page is only served to this computer.</p>", 403)
    client = (request.client.host, request.client.port) if request.client else None
    server = request.scope.get("server")
    peer = await anyio.to_thread.run_sync(peer_of, client, tuple(server) if server else None)
    if peer == "server":
        return _page("Forbidden", "<p>Approvals must come from a human outside the sandbox: this request comes "
                     "from a command the server runs.</p>", 403)
    if peer == "unknown":
        return _page("Forbidden", "<p>Could not tell which program sent this request, so it cannot see or decide "
                     f"approvals. Decide in a terminal instead: <code>{html.escape(cli_command(settings, 'approve', '--list'))}"
                     "</code>"
                     "</p>", 403)
    given = request.query_params.get(page_key.QUERY) or request.cookies.get(page_key.COOKIE)
    if not await anyio.to_thread.run_sync(page_key.matches, settings.data_dir, given):
        return _page("Forbidden", "<p>Open the approval page from the address with its key that the server printed "
                     "when it started, or that this command prints: "
                     f"<code>{html.escape(cli_command(settings, 'approve', '--list'))}</code> "
                     "(your browser keeps the key afterwards).</p>", 403)
    return None


def _same_origin(request: Request) -> bool:
    """The Origin header, parsed, names exactly this page's scheme, host and port (absent: not a
    browser form post; the CSRF token still decides)."""
    from mcp_server.transports import DEFAULT_PORTS, parse_authority, parse_origin

    origin = request.headers.get("origin")
    if origin is None:
        return True
    scheme = request.url.scheme.lower()
    host = parse_authority(request.headers.get("host", ""))
    parsed = parse_origin(origin)
    if host is None or parsed is None or scheme not in DEFAULT_PORTS:
        return False
    return parsed == (scheme, host[0], host[1] if host[1] is not None else DEFAULT_PORTS[scheme])


def _approval_view(approval: Any) -> str:
    return (f"<p>The assistant wants to run <b>{html.escape(approval.tool)}</b> "
            f"(requested by {html.escape(approval.origin)}).</p>"
            f"<p><b>Risk:</b> {html.escape(approval.risk)} &mdash; {html.escape(approval.reason)} "
            f"<small>(rule {html.escape(approval.rule_id)})</small></p>"
            f"<p><b>Arguments:</b></p><pre>{html.escape(approval.pretty_args)}</pre>")


def add_approval_routes(server: Any, gate: Any) -> None:
    store = gate.store

    @server.custom_route("/approvals", methods=["GET"])
    async def list_page(request: Request) -> Response:
        if (refused := await _refusal(request, gate.settings)) is not None:
            return refused
        if page_key.QUERY in request.query_params:
            return _keep_key(request)
        items = "".join(f"<li><a href='/approvals/{html.escape(a.id)}'>{html.escape(a.id)}</a>: "
                        f"{html.escape(a.tool)} ({html.escape(a.risk)} risk)</li>" for a in store.pending())
        return _page("Pending approvals", f"<ul>{items}</ul>" if items else "<p>Nothing is waiting.</p>")

    @server.custom_route("/approvals/{approval_id}", methods=["GET", "POST"])
    async def approval_page(request: Request) -> Response:
        if (refused := await _refusal(request, gate.settings)) is not None:
            return refused
        approval_id = str(request.path_params.get("approval_id", ""))
        try:
            approval = store.get(approval_id)
        except GeneralAgentError as exc:
            return _page("Not found", f"<p>{html.escape(str(exc))}</p>", 404)
        if request.method == "POST":
            return await _post(request, store, gate, approval)
        if page_key.QUERY in request.query_params:
            return _keep_key(request)
        if approval.status != "pending" or approval.expired():
            state = "expired" if approval.status == "pending" else approval.status
            return _page(f"Approval {approval.id}", _approval_view(approval) + f"<p>This approval is {state}.</p>")
        form = (f"<form method='post'><input type='hidden' name='csrf' value='{html.escape(approval.csrf)}'>"
                f"<p><b>Approve for:</b></p>{_scope_options(approval)}"
                "<button name='decision' value='approve'>Approve</button>"
                "<button name='decision' value='reject'>Reject</button></form>")
        return _page(f"Approve {approval.id}?", _approval_view(approval) + form)


def _keep_key(request: Request) -> Response:
    """The key arrived in the address: the browser keeps it in a cookie only this page sees, and the address
    is shown without it (no key in the history, the Referer or a screenshot)."""
    answer = RedirectResponse(request.url.path, status_code=303, headers=_HEADERS)
    answer.set_cookie(page_key.COOKIE, str(request.query_params[page_key.QUERY]), httponly=True, samesite="strict",
                      path="/approvals")
    return answer


def _scope_options(approval: Any) -> str:
    """Radio buttons for the scopes this approval may get (the first, this exact call once, is checked)."""
    return "".join(
        f"<p><label><input type='radio' name='scope' value='{name}'{' checked' if i == 0 else ''}> "
        f"{html.escape(text)}</label></p>"
        for i, (name, text) in enumerate(scope_choices(approval))
    )


async def _post(request: Request, store: Any, gate: Any, approval: Any) -> Response:
    if not _same_origin(request):
        return _page("Forbidden", "<p>Cross-origin request refused.</p>", 403)
    form = await request.form()
    token = str(form.get("csrf") or "")
    if not token or not hmac.compare_digest(token.encode(), approval.csrf.encode()):
        return _page("Forbidden", "<p>Missing or wrong CSRF token. Reload the approval page.</p>", 403)
    decision = str(form.get("decision") or "")
    if decision not in ("approve", "reject"):
        return _page("Bad request", "<p>Choose Approve or Reject.</p>", 400)
    scope = str(form.get("scope") or "once")
    if scope not in SCOPES:
        return _page("Bad request", "<p>Choose what the approval covers.</p>", 400)
    try:
        decided = store.decide(approval.id, decision == "approve", by="http-page", scope=scope)
    except GeneralAgentError as exc:
        return _page("Not possible", f"<p>{html.escape(str(exc))}</p>", 409)
    gate.audit.record_decision(decided)
    verdict = "rejected."
    if decision == "approve":
        verdict = ("approved. The assistant may now repeat the call once." if decided.scope == "once" else
                   f"approved for {dict(scope_choices(decided))[decided.scope]}.")
    return _page(f"Approval {decided.id}", _approval_view(decided) + f"<p><b>{html.escape(verdict)}</b></p>")
