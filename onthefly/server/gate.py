"""The opening handshake's checks and the plain HTTP answers, as pure functions.

Security model: every request must name our own host (``127.0.0.1:PORT`` or
``localhost:PORT``, against DNS rebinding). Websocket upgrades must also carry the
session's token and come from an allowed origin: no browser at all (CLI, Python client,
the VS Code extension host), a VS Code webview, our own page, or the page of another live
OnTheFly session listed in the same discovery folder — one browser dashboard watches every
run on the machine, and those pages are ours (same bundle, same strict CSP). Any other
origin gets 403 even with the right token.

Plain ``GET`` requests get the dashboard's static files: the page needs no token (the
token travels in the page's URL and its script opens the websocket with it). The page
learns the other live sessions, tokens included, from ``GET /sessions?token=TOKEN``; that
endpoint requires this session's token (401 otherwise) and is never cached. It reveals
nothing beyond what the discovery files already give the same user: whoever holds one
token could read the folder holding them all.
"""

from __future__ import annotations

import hmac
import http
import json
import mimetypes
import re
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from onthefly.server.discovery import SessionFile

SESSIONS_PATH = "/sessions"
"""The page's list of live sessions (``GET /sessions?token=TOKEN``)."""

# connect-src allows websockets to any loopback port: the page also connects to the other
# live sessions, whose ports are not known in advance (each of those servers checks the
# page's origin and that session's token).
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self' ws://127.0.0.1:* ws://localhost:*; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
_LOOPBACK_ORIGIN = re.compile(r"http://(?:127\.0\.0\.1|localhost):(\d{1,5})")

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".woff2": "font/woff2",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}

_NOT_BUILT = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>OnTheFly</title></head>
<body><h1>OnTheFly</h1>
<p>The training session is running, but the dashboard bundle is not built.
Build it with <code>npm run build</code> in <code>extension/</code>, or open the dashboard
from VS Code.</p></body></html>
"""


def is_upgrade(request: Request) -> bool:
    """Whether the request asks for a websocket (anything else is a plain page request)."""
    return "websocket" in request.headers.get("Upgrade", "").lower()


def is_sessions_request(request: Request) -> bool:
    """Whether a plain request asks for the list of live sessions."""
    return urlsplit(request.path).path == SESSIONS_PATH


def refuse_upgrade(
    request: Request,
    *,
    token: str,
    port: int,
    live_ports: Callable[[], Collection[int]] = frozenset,
) -> Response | None:
    """The 401/403 response refusing a websocket upgrade, or ``None`` to accept it.

    Args:
        request: the opening handshake.
        token: this session's secret.
        port: this server's port (its own page's origin is always allowed).
        live_ports: the ports of the live sessions in this session's discovery folder;
            called only for a loopback origin on another port.
    """
    origin = request.headers.get("Origin")
    if origin is not None and not _allowed_origin(origin, port, live_ports):
        return _text(
            http.HTTPStatus.FORBIDDEN,
            f"Origin {origin!r} is not allowed; expected the page of a live OnTheFly "
            f"session (such as http://127.0.0.1:{port}) or a VS Code webview.\n",
        )
    return _refuse_token(request, token)


def sessions_response(
    request: Request, *, token: str, sessions: Callable[[], Iterable[SessionFile]]
) -> Response:
    """The live sessions as JSON for this session's page; 401 without this session's token.

    Each entry has ``pid``, ``port``, ``project``, ``run``, ``session``, ``token`` and
    ``started_at``. The answer carries tokens, so it is never cached; a page of another
    origin cannot read it (no CORS headers).
    """
    refused = _refuse_token(request, token)
    if refused is not None:
        return refused
    listed = [
        {
            "pid": s.pid,
            "port": s.port,
            "project": s.project,
            "run": s.run,
            "session": s.session,
            "token": s.token,
            "started_at": s.started_at,
        }
        for s in sessions()
    ]
    return json_response({"sessions": listed})


def json_response(document: object) -> Response:
    """``document`` as a JSON answer that is never cached."""
    body = json.dumps(document).encode()
    headers = Headers()
    headers["Content-Type"] = "application/json"
    headers["Content-Length"] = str(len(body))
    headers["X-Content-Type-Options"] = "nosniff"
    headers["Cache-Control"] = "no-store"
    return Response(http.HTTPStatus.OK, "OK", headers, body)


def refuse_token(request: Request, token: str) -> Response | None:
    """A 401 unless the request carries ``token`` (``?token=`` or a bearer header)."""
    return _refuse_token(request, token)


def text_response(status: http.HTTPStatus, text: str) -> Response:
    """A plain-text answer saying what was wrong."""
    return _text(status, text)


def _refuse_token(request: Request, token: str) -> Response | None:
    given = _token_of(request)
    if given is None:
        return _text(
            http.HTTPStatus.UNAUTHORIZED,
            "Missing token; expected ?token=... in the URL or 'Authorization: Bearer ...'.\n",
        )
    if not hmac.compare_digest(given.encode(), token.encode()):
        return _text(http.HTTPStatus.UNAUTHORIZED, "Wrong token for this session.\n")
    return None


def refuse_host(request: Request, port: int) -> Response | None:
    """A 403 for a ``Host`` other than this server (defends against DNS rebinding)."""
    host = request.headers.get("Host", "")
    if host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        return None
    return _text(
        http.HTTPStatus.FORBIDDEN,
        f"Host {host!r} is not served here; expected 127.0.0.1:{port} or localhost:{port}.\n",
    )


def static_response(root: Path | None, request: Request) -> Response:
    """A file of the dashboard bundle under ``root``, never anything outside it."""
    path = unquote(urlsplit(request.path).path)
    relative = path.lstrip("/") or "index.html"
    if root is None or not (root / "index.html").is_file():
        if relative == "index.html":
            return _file_response(_NOT_BUILT, ".html")
        return _text(http.HTTPStatus.NOT_FOUND, "Not found (the dashboard is not built).\n")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base) or "\x00" in relative:
        return _text(http.HTTPStatus.FORBIDDEN, "Path outside the dashboard folder.\n")
    if not target.is_file():
        return _text(http.HTTPStatus.NOT_FOUND, f"Not found: {path}\n")
    return _file_response(target.read_bytes(), target.suffix)


def _file_response(body: bytes, suffix: str) -> Response:
    content_type = _CONTENT_TYPES.get(suffix.lower()) or (
        mimetypes.types_map.get(suffix.lower(), "application/octet-stream")
    )
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Content-Security-Policy"] = _CSP
    headers["X-Content-Type-Options"] = "nosniff"
    # The page's URL carries the token: never leak it through a Referer header.
    headers["Referrer-Policy"] = "no-referrer"
    headers["Cache-Control"] = "no-store"
    return Response(http.HTTPStatus.OK, "OK", headers, body)


def _text(status: http.HTTPStatus, text: str) -> Response:
    body = text.encode()
    headers = Headers()
    headers["Content-Type"] = "text/plain; charset=utf-8"
    headers["Content-Length"] = str(len(body))
    headers["X-Content-Type-Options"] = "nosniff"
    return Response(status.value, status.phrase, headers, body)


def _allowed_origin(origin: str, port: int, live_ports: Callable[[], Collection[int]]) -> bool:
    if origin.startswith("vscode-webview://"):
        return True
    loopback = _LOOPBACK_ORIGIN.fullmatch(origin)
    if loopback is None:
        return False
    origin_port = int(loopback.group(1))
    return origin_port == port or origin_port in live_ports()


def _token_of(request: Request) -> str | None:
    values = parse_qs(urlsplit(request.path).query).get("token")
    if values:
        return values[0]
    authorization = request.headers.get("Authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None
