"""The front door: waiting connections cost no thread, and the limits hold against a real
server (real sockets, a real websocket client)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from onthefly.server import SessionServer
from onthefly.server.admission import Limits

from .conftest import ask, open_client


@contextmanager
def limited(**limits: float) -> Iterator[SessionServer]:
    with SessionServer("proj", "main", port=0, quiet=True, limits=Limits(**limits)) as server:
        yield server  # type: ignore[arg-type]


def raw(port: int, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if data:
        sock.sendall(data)
    return sock


def status_of(sock: socket.socket) -> int:
    """The status of the answer on ``sock`` (0: closed without one)."""
    line = sock.makefile("rb").readline().decode()
    return int(line.split()[1]) if line else 0


def closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def get(port: int, path: str = "/") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()


def test_waiting_connections_hold_no_thread_and_time_out() -> None:
    with limited(handshake_timeout=0.5) as server:
        before = threading.active_count()
        idle = [raw(server.port, b"") for _ in range(20)]
        idle += [raw(server.port, b"GET / HTTP/1.1\r\nHost: 127") for _ in range(20)]
        try:
            time.sleep(0.2)
            assert threading.active_count() == before
            assert all(closed_by_server(sock, within=3) for sock in idle)
        finally:
            for sock in idle:
                sock.close()


def test_beyond_the_waiting_cap_the_longest_waiting_goes_and_a_client_gets_in() -> None:
    with limited(max_waiting=8) as server:
        idle = [raw(server.port, b"") for _ in range(30)]
        try:
            with open_client(server) as ws:
                assert ask(ws, type="ping", id="1")["type"] == "reply"
            # The client took the place of the longest waiting of the last eight.
            assert all(closed_by_server(sock, within=3) for sock in idle[:-7])
            assert not any(closed_by_server(sock, within=0.05) for sock in idle[-7:])
        finally:
            for sock in idle:
                sock.close()


def test_a_head_sent_in_pieces_is_still_served() -> None:
    with limited() as server:
        sock = raw(server.port, b"GET / HTTP/1.1\r\n")
        time.sleep(0.1)
        sock.sendall(f"Host: 127.0.0.1:{server.port}\r\n".encode())
        time.sleep(0.1)
        sock.sendall(b"\r\n")
        assert status_of(sock) == 200
        sock.close()


def test_authenticated_connections_beyond_the_cap_get_503() -> None:
    with limited(max_connections=2) as server, open_client(server), open_client(server):
        with pytest.raises(InvalidStatus) as refused:
            connect(server.ws_url, open_timeout=5)
        assert refused.value.response.status_code == 503
        assert b"already has 2 connections" in refused.value.response.body


def test_a_closed_connection_makes_room_for_the_next() -> None:
    with limited(max_connections=1) as server:
        with open_client(server):
            pass
        deadline = time.monotonic() + 5
        while True:  # the first connection's threads end shortly after it closes
            try:
                with open_client(server) as ws:
                    assert ask(ws, type="ping", id="1")["type"] == "reply"
                break
            except InvalidStatus:
                assert time.monotonic() < deadline
                time.sleep(0.05)


def test_requests_without_the_token_are_rate_limited_but_a_client_with_it_is_not() -> None:
    with limited(source_rate=0.01, source_burst=3) as server:
        statuses = []
        for _ in range(5):
            sock = raw(server.port, get(server.port))
            statuses.append(status_of(sock))
            sock.close()
        assert statuses == [200, 200, 200, 429, 429]
        with open_client(server) as ws:
            assert ask(ws, type="ping", id="1")["type"] == "reply"


def test_malformed_and_oversized_heads_are_answered_without_a_thread() -> None:
    with limited(max_head_bytes=1024) as server:
        before = threading.active_count()
        answers = {}
        for name, data in {
            "no request line": b"\r\n\r\n",
            "not HTTP": b"HELLO\r\n\r\n",
            "bad header": b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            "HTTP/2 preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            "too large": b"GET / HTTP/1.1\r\nX: " + b"a" * 2000,
        }.items():
            sock = raw(server.port, data)
            answers[name] = status_of(sock)
            sock.close()
        assert threading.active_count() == before
    assert answers == {
        "no request line": 400,
        "not HTTP": 400,
        "bad header": 400,
        "HTTP/2 preface": 400,
        "too large": 431,
    }


def test_refusals_say_what_was_expected() -> None:
    with limited(max_head_bytes=1024) as server:
        sock = raw(server.port, b"HELLO\r\n\r\n")
        answer = sock.makefile("rb").read().decode()
        sock.close()
    assert answer.startswith("HTTP/1.1 400 Bad Request\r\n")
    assert "expected an HTTP/1.1 GET" in answer


def test_the_server_closes_cleanly_with_connections_waiting_and_served() -> None:
    server = SessionServer("proj", "main", port=0, quiet=True).start()
    before = threading.active_count()
    idle = [raw(server.port, b"") for _ in range(10)]
    try:
        with connect(server.ws_url, open_timeout=5) as ws:
            assert json.loads(ws.recv(timeout=5))["type"] == "hello"
            server.close()
            assert all(closed_by_server(sock, within=3) for sock in idle)
        deadline = time.monotonic() + 5
        while threading.active_count() >= before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() < before  # the door and the pump are gone
    finally:
        server.close()
        for sock in idle:
            sock.close()
