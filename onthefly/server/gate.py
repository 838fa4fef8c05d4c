"""The opening handshake's checks and the plain HTTP answers, as pure functions.

Websocket upgrades must come to our own host name, from an allowed origin (our own page,
a VS Code webview, or no browser at all) and carry the session's token. Plain ``GET``
requests get the dashboard's static files: the page needs no token (the token travels in
the page's URL and its script opens the websocket with it).
"""

from __future__ import annotations

import hmac
import http
import mimetypes
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from websockets.datastructures import Headers
from websockets.http11 import Request, Response

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


def refuse_upgrade(request: Request, *, token: str, port: int) -> Response | None:
    """The 401/403 response refusing a websocket upgrade, or ``None`` to accept it."""
    origin = request.headers.get("Origin")
    if origin is not None and not _allowed_origin(origin, port):
        return _text(
            http.HTTPStatus.FORBIDDEN,
            f"Origin {origin!r} is not allowed; expected this server's own page "
            f"(http://127.0.0.1:{port}) or a VS Code webview.\n",
        )
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


def static_response(root: Path | None, request: Request, *, port: int) -> Response:
    """A file of the dashboard bundle under ``root``, never anything outside it."""
    path = unquote(urlsplit(request.path).path)
    relative = path.lstrip("/") or "index.html"
    if root is None or not (root / "index.html").is_file():
        if relative == "index.html":
            return _file_response(_NOT_BUILT, ".html", port)
        return _text(http.HTTPStatus.NOT_FOUND, "Not found (the dashboard is not built).\n")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base) or "\x00" in relative:
        return _text(http.HTTPStatus.FORBIDDEN, "Path outside the dashboard folder.\n")
    if not target.is_file():
        return _text(http.HTTPStatus.NOT_FOUND, f"Not found: {path}\n")
    return _file_response(target.read_bytes(), target.suffix, port)


def _file_response(body: bytes, suffix: str, port: int) -> Response:
    content_type = _CONTENT_TYPES.get(suffix.lower()) or (
        mimetypes.types_map.get(suffix.lower(), "application/octet-stream")
    )
    headers = Headers()
    headers["Content-Type"] = content_type
    headers["Content-Length"] = str(len(body))
    headers["Content-Security-Policy"] = _csp(port)
    headers["X-Content-Type-Options"] = "nosniff"
    # The page's URL carries the token: never leak it through a Referer header.
    headers["Referrer-Policy"] = "no-referrer"
    headers["Cache-Control"] = "no-store"
    return Response(http.HTTPStatus.OK, "OK", headers, body)


def _csp(port: int) -> str:
    sockets = f"ws://127.0.0.1:{port} ws://localhost:{port}"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        f"font-src 'self'; connect-src 'self' {sockets}; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


def _text(status: http.HTTPStatus, text: str) -> Response:
    body = text.encode()
    headers = Headers()
    headers["Content-Type"] = "text/plain; charset=utf-8"
    headers["Content-Length"] = str(len(body))
    headers["X-Content-Type-Options"] = "nosniff"
    return Response(status.value, status.phrase, headers, body)


def _allowed_origin(origin: str, port: int) -> bool:
    if origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        return True
    return origin.startswith("vscode-webview://")


def _token_of(request: Request) -> str | None:
    values = parse_qs(urlsplit(request.path).query).get("token")
    if values:
        return values[0]
    authorization = request.headers.get("Authorization", "")
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None
