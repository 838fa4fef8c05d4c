"""The opening handshake's checks and the plain HTTP answers, as pure functions.

A request whose ``Host`` is missing, repeated or malformed, or whose ``Origin`` is repeated
or malformed, is answered 400 before anything else (a well-formed but foreign one is 403).

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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Shape:
    pattern: re.Pattern[str]
    expected: str


# RFC 9110 / RFC 6454 shapes, kept strict: a name or an IP literal and an optional port for
# Host; "null" or scheme://host[:port] for Origin. Anything else is malformed, not foreign.
_AUTHORITY = r"(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?"
_SINGLE_HEADERS = (
    ("Host", _Shape(re.compile(_AUTHORITY), "host[:port]"), True),
    (
        "Origin",
        _Shape(
            re.compile(rf"null|[A-Za-z][A-Za-z0-9+.-]*://{_AUTHORITY}"),
            "scheme://host[:port] or null",
        ),
        False,
    ),
    ("Authorization", None, False),
)

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


def refuse(
    request: Request,
    *,
    token: str,
    port: int,
    live_ports: Callable[[], Collection[int]] = frozenset,
) -> Response | None:
    """The 400/401/403 refusing ``request``, or ``None`` when it may be served.

    Malformed headers first (400), then a foreign ``Host`` (403), a method other than
    ``GET`` (405), then for a websocket upgrade the origin (403) and the token (401). A plain
    page request needs no token.

    Args:
        request: the request's head.
        token: this session's secret.
        port: this server's port.
        live_ports: the ports of the live sessions of this session's discovery folder.
    """
    refused = refuse_malformed(request) or refuse_host(request, port) or _refuse_method(request)
    if refused is None and is_upgrade(request):
        refused = refuse_upgrade(request, token=token, port=port, live_ports=live_ports)
    return refused


def is_authenticated(
    request: Request,
    *,
    token: str,
    port: int,
    live_ports: Callable[[], Collection[int]] = frozenset,
) -> bool:
    """Whether ``request`` is a websocket upgrade that :func:`refuse` lets through."""
    return is_upgrade(request) and (
        refuse(request, token=token, port=port, live_ports=live_ports) is None
    )


def refuse_malformed(request: Request) -> Response | None:
    """A 400 for a missing, repeated or malformed ``Host``, or a repeated or malformed
    ``Origin``, or a repeated ``Authorization`` (HTTP/1.1 requires exactly one ``Host``;
    browsers send at most one ``Origin``)."""
    for name, shape, required in _SINGLE_HEADERS:
        values = request.headers.get_all(name)
        if len(values) > 1:
            expected = "exactly one" if required else "at most one"
            return _text(
                http.HTTPStatus.BAD_REQUEST, f"{len(values)} {name} headers; expected {expected}.\n"
            )
        if not values:
            if required:
                return _text(http.HTTPStatus.BAD_REQUEST, f"No {name} header; expected one.\n")
        elif shape is not None and shape.pattern.fullmatch(values[0]) is None:
            return _text(
                http.HTTPStatus.BAD_REQUEST,
                f"Malformed {name} header {values[0]!r}; expected {shape.expected}.\n",
            )
    return None


def is_upgrade(request: Request) -> bool:
    """Whether the request asks for a websocket (anything else is a plain page request)."""
    return any("websocket" in value.lower() for value in request.headers.get_all("Upgrade"))


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
    origins = request.headers.get_all("Origin")
    origin = origins[0] if len(origins) == 1 else None
    if origins and (origin is None or not _allowed_origin(origin, port, live_ports)):
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
    hosts = request.headers.get_all("Host")
    host = hosts[0] if len(hosts) == 1 else ""
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


def _refuse_method(request: Request) -> Response | None:
    if request.method == "GET":
        return None
    text = f"Method {request.method!r} not allowed; expected GET.\n"
    response = _text(http.HTTPStatus.METHOD_NOT_ALLOWED, text)
    response.headers["Allow"] = "GET"
    return response


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
    authorizations = request.headers.get_all("Authorization")
    authorization = authorizations[0] if len(authorizations) == 1 else ""
    scheme, _, credentials = authorization.partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None
