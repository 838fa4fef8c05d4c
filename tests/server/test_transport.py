"""The websocket transport: handshake checks, static files, limits (slow clients:
``test_slow_clients.py``)."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from onthefly.errors import ConfigurationError
from onthefly.protocol import MAX_FRAME_BYTES
from onthefly.server import SessionServer
from onthefly.server.transport import bind

from .conftest import answer, ask, open_client, recv


def _get(server: SessionServer, path: str, host: str | None = None) -> http.client.HTTPResponse:
    return _get_with_body(server, path, host)[0]


def _get_with_body(
    server: SessionServer, path: str, host: str | None = None
) -> tuple[http.client.HTTPResponse, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    headers = {"Host": host} if host else {}
    conn.request("GET", path, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response, body


def _refused_status(url: str, **kwargs: Any) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, open_timeout=5, **kwargs)
    return refused.value.response.status_code


# --------------------------------------------------------------------------- authentication


def test_connections_without_the_right_token_are_refused(server: SessionServer) -> None:
    base = f"ws://127.0.0.1:{server.port}/"
    assert _refused_status(base) == 401
    assert _refused_status(base + "?token=wrong") == 401
    assert _refused_status(base, additional_headers={"Authorization": "Bearer wrong"}) == 401


def test_token_in_query_or_bearer_header_is_accepted(server: SessionServer) -> None:
    with open_client(server) as ws:
        assert ask(ws, type="ping", id="1")["type"] == "reply"
    headers = {"Authorization": f"Bearer {server.token}"}
    with connect(f"ws://127.0.0.1:{server.port}/", additional_headers=headers) as ws:
        assert recv(ws)["type"] == "hello"


@pytest.mark.parametrize("origin", ["http://evil.example", "http://127.0.0.1:1", "null"])
def test_foreign_origins_are_refused_even_with_the_token(
    server: SessionServer, origin: str
) -> None:
    assert _refused_status(server.ws_url, origin=origin) == 403


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:{port}", "http://localhost:{port}", "vscode-webview://abc123"]
)
def test_own_page_and_vscode_webviews_are_allowed(server: SessionServer, origin: str) -> None:
    with open_client(server, origin=origin.format(port=server.port)) as ws:
        assert ask(ws, type="ping", id="1")["type"] == "reply"


def test_pages_of_other_live_sessions_in_the_same_home_are_allowed(
    server: SessionServer,
) -> None:
    with SessionServer("proj", "second", port=0, quiet=True) as sibling:
        for origin in (f"http://127.0.0.1:{sibling.port}", f"http://localhost:{sibling.port}"):
            with open_client(server, origin=origin) as ws:
                assert ask(ws, type="ping", id="1")["type"] == "reply"
        gone = sibling.port
    # Once that session has ended, its port is foreign again.
    assert _refused_status(server.ws_url, origin=f"http://127.0.0.1:{gone}") == 403


def test_pages_of_sessions_in_another_home_are_refused(
    server: SessionServer, tmp_path: Path
) -> None:
    with SessionServer("other", "run", port=0, quiet=True, home=tmp_path / "elsewhere") as other:
        assert _refused_status(server.ws_url, origin=f"http://127.0.0.1:{other.port}") == 403


def test_a_sibling_origin_still_needs_the_token(server: SessionServer) -> None:
    with SessionServer("proj", "second", port=0, quiet=True) as sibling:
        url = f"ws://127.0.0.1:{server.port}/?token={sibling.token}"
        assert _refused_status(url, origin=f"http://127.0.0.1:{sibling.port}") == 401


def test_foreign_host_header_is_refused(server: SessionServer) -> None:
    assert _get(server, "/", host="evil.example").status == 403
    assert _get(server, "/", host=f"localhost:{server.port}").status == 200


def _raw_status(server: SessionServer, head: str) -> tuple[int, str]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n")
        answer = sock.makefile("rb").read().decode("latin-1")
    return int(answer.split()[1]), answer


_UPGRADE = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
_UPGRADE += "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ("Host: {own}\r\nHost: {own}\r\n", "2 Host headers"),
        ("Host: {own}\r\nHost: evil.example\r\n", "2 Host headers"),
        ("", "No Host header"),
        ("Host: \r\n", "Malformed Host"),
        ("Host: 127.0.0.1:{port} x\r\n", "Malformed Host"),
        ("Host: user@127.0.0.1:{port}\r\n", "Malformed Host"),
        ("Host: {own}\r\nOrigin: http://127.0.0.1:{port}\r\nOrigin: null\r\n", "2 Origin"),
        ("Host: {own}\r\nOrigin: 127.0.0.1:{port}\r\n", "Malformed Origin"),
        ("Host: {own}\r\nOrigin: http://127.0.0.1:{port}/page\r\n", "Malformed Origin"),
        ("Host: {own}\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n", "2 Auth"),
    ],
)
@pytest.mark.parametrize("upgrade", [True, False])
def test_repeated_or_malformed_host_and_origin_headers_get_400(
    server: SessionServer, headers: str, expected: str, upgrade: bool
) -> None:
    fields = headers.format(own=f"127.0.0.1:{server.port}", port=server.port)
    path = f"/?token={server.token}"
    status, answer = _raw_status(
        server, f"GET {path} HTTP/1.1\r\n{fields}{_UPGRADE if upgrade else ''}"
    )
    assert status == 400, answer
    assert expected in answer


def test_well_formed_but_foreign_hosts_and_origins_stay_403(server: SessionServer) -> None:
    own = f"Host: 127.0.0.1:{server.port}\r\n"
    path = f"/?token={server.token}"
    foreign_host = f"GET / HTTP/1.1\r\nHost: [::1]:{server.port}\r\n"
    foreign_origin = f"GET {path} HTTP/1.1\r\n{own}Origin: https://evil.example\r\n{_UPGRADE}"
    assert _raw_status(server, foreign_host)[0] == 403
    assert _raw_status(server, foreign_origin)[0] == 403


# --------------------------------------------------------------------------- static files


@pytest.fixture
def bundle(tmp_path: Path) -> Iterator[tuple[SessionServer, Path]]:
    root = tmp_path / "dashboard"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>dash</title>")
    (root / "assets" / "app.js").write_text("console.log(1)")
    (tmp_path / "secret.txt").write_text("do not serve")
    with SessionServer("proj", "main", port=0, quiet=True, dashboard_dir=root) as started:
        yield started, root


def test_dashboard_files_are_served_with_types_and_security_headers(
    bundle: tuple[SessionServer, Path],
) -> None:
    server, _ = bundle
    page = _get(server, "/?token=anything")
    assert page.status == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert page.headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    assert (
        "connect-src 'self' ws://127.0.0.1:* ws://localhost:*;"
        in page.headers["Content-Security-Policy"]
    )
    script = _get(server, "/assets/app.js")
    assert script.status == 200
    assert script.headers["Content-Type"].startswith("text/javascript")
    assert _get(server, "/assets/missing.js").status == 404


@pytest.mark.parametrize(
    "path", ["/../secret.txt", "/%2e%2e/secret.txt", "/assets/../../secret.txt", "/..%2fsecret.txt"]
)
def test_path_traversal_is_refused(bundle: tuple[SessionServer, Path], path: str) -> None:
    server, _ = bundle
    assert _get(server, path).status in (403, 404)


def test_missing_bundle_gives_a_page_saying_so(tmp_path: Path) -> None:
    with SessionServer("p", "r", port=0, quiet=True, dashboard_dir=tmp_path / "none") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/")
        response = conn.getresponse()
        body = response.read().decode()
        conn.close()
    assert response.status == 200
    assert "not built" in body


# --------------------------------------------------------------------------- live sessions


def test_sessions_lists_every_live_session_of_the_home_with_its_token(
    server: SessionServer,
) -> None:
    with SessionServer("other", "second", port=0, quiet=True) as sibling:
        response, body = _get_with_body(server, f"/sessions?token={server.token}")
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Cache-Control"] == "no-store"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        listed = {entry["port"]: entry for entry in json.loads(body)["sessions"]}
    assert set(listed) == {server.port, sibling.port}
    assert listed[sibling.port]["token"] == sibling.token
    assert listed[sibling.port]["session"] == sibling.session_id
    assert (listed[sibling.port]["project"], listed[sibling.port]["run"]) == ("other", "second")
    assert set(listed[server.port]) == {
        "pid",
        "port",
        "project",
        "run",
        "session",
        "token",
        "started_at",
    }


@pytest.mark.parametrize("query", ["", "?token=wrong", "?token="])
def test_sessions_needs_this_sessions_token(server: SessionServer, query: str) -> None:
    with SessionServer("other", "second", port=0, quiet=True) as sibling:
        response, body = _get_with_body(server, f"/sessions{query}")
        assert response.status == 401
        assert sibling.token.encode() not in body
        # Another session's token is not this session's token.
        assert _get(server, f"/sessions?token={sibling.token}").status == 401


def test_sessions_refuses_a_foreign_host(server: SessionServer) -> None:
    assert _get(server, f"/sessions?token={server.token}", host="evil.example").status == 403


# --------------------------------------------------------------------------- bad input, limits


def test_every_bad_frame_gets_an_error_and_serving_goes_on(server: SessionServer) -> None:
    with open_client(server) as ws:
        ws.send("{not json")
        assert answer(ws, None)["error"]["code"] == "bad_json"
        ws.send(b"\x00\x01")
        assert answer(ws, None)["error"]["code"] == "bad_json"
        assert ask(ws, type="warp", id="w")["error"]["code"] == "unknown_type"
        assert ask(ws, type="ping", id="p", speed=1)["error"]["code"] == "bad_message"
        ws.send(json.dumps({"type": "ping", "id": "big", "pad": "x" * MAX_FRAME_BYTES}))
        too_large = answer(ws, None)
        assert too_large["error"]["code"] == "frame_too_large"
        assert ask(ws, type="ping", id="still")["type"] == "reply"


def test_frames_beyond_four_times_the_limit_close_with_1009(server: SessionServer) -> None:
    with open_client(server, max_size=None) as ws:
        ws.send("x" * (4 * MAX_FRAME_BYTES + 1))
        with pytest.raises(ConnectionClosed) as closed:
            recv(ws)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
    with open_client(server) as ws:  # the server itself is unaffected
        assert ask(ws, type="ping", id="p")["type"] == "reply"


def test_floods_are_rate_limited_with_one_answer_per_frame(server: SessionServer) -> None:
    with open_client(server) as ws:
        for n in range(600):
            ws.send(json.dumps({"type": "ping", "id": str(n)}))
        answers = [answer(ws, str(n)) for n in range(600)]
    codes = [a["error"]["code"] for a in answers if a["type"] == "error"]
    assert codes and set(codes) == {"rate_limited"}
    assert sum(a["type"] == "reply" for a in answers) >= 400  # the burst at least


# --------------------------------------------------------------------------- ports


def test_a_taken_port_moves_to_the_next_free_one() -> None:
    first = bind("127.0.0.1", 0)
    port = first.getsockname()[1]
    try:
        second = bind("127.0.0.1", port)
        assert second.getsockname()[1] > port
        second.close()
        with pytest.raises(ConfigurationError, match="all in use"):
            bind("127.0.0.1", port, attempts=1)
    finally:
        first.close()
