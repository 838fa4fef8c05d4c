"""Fuzzing the HTTP side: hypothesis-driven request lines and headers against a real run.

Before a websocket exists there is a plain HTTP request: its request line and headers are
parsed by the session server's front door and the websocket library, and checked by the
gate. Here each generated request (methods, paths, versions, line endings and headers of
every kind: our ``Host`` and foreign, repeated or malformed ones, origins, tokens, upgrade
headers, bodies, control and non-ASCII bytes) goes on a fresh connection, from one of many
loopback source addresses, to the session of a training process.

Checked: every request gets exactly one HTTP answer with a status the server means to give
(never 500, never a silently closed connection); the run trains on; afterwards a real client
is served and the process has no more threads than before.
"""

from __future__ import annotations

import socket
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onthefly.server.discovery import SessionFile
from tests.callbacks.live import wait_for_session
from tests.hardening.figures import record
from tests.hardening.process import training
from tests.hardening.wire import Wire


def deliberate(status: int) -> bool:
    """An answer the server means to give: a websocket, a page, a refusal of the request
    (4xx), too many connections (503) or an HTTP version it does not speak (505); never an
    error of its own (500) or no answer at all (0)."""
    return status in (101, 200, 503, 505) or 400 <= status < 500


SOURCES = 200
"""Loopback source addresses the requests come from (127.0.0.2 onwards)."""

_UNSAFE = st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\r\n\r\n", b"\r\n"))


def _text(alphabet: str, low: int = 0, high: int = 30) -> st.SearchStrategy[bytes]:
    return st.text(alphabet, min_size=low, max_size=high).map(lambda s: s.encode())


def requests(session: SessionFile) -> st.SearchStrategy[bytes]:
    """Whole request heads (ending in an empty line), each a mix of valid and broken parts."""
    port, token = session.port, session.token
    own = [f"127.0.0.1:{port}".encode(), f"localhost:{port}".encode()]
    printable = "".join(map(chr, range(0x21, 0x7F)))
    methods = st.sampled_from([b"GET", b"GET", b"POST", b"HEAD", b"OPTIONS", b"CONNECT", b"get"])
    paths = st.one_of(
        st.sampled_from(
            [
                *(b"/", f"/?token={token}".encode(), f"/sessions?token={token}".encode()),
                *(b"/sessions", b"/index.html", b"/../../etc/passwd", b"/%2e%2e/x", b"*", b""),
            ]
        ),
        _text(printable, 1, 60).map(lambda p: b"/" + p),
        _UNSAFE,
    )
    versions = st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1", b""])
    values = st.one_of(
        st.sampled_from([*own, b"evil.example", b"", b"127.0.0.1:99999", b"[::1]", b"a b"]),
        st.sampled_from([b"null", f"http://127.0.0.1:{port}".encode(), b"https://evil.example"]),
        st.sampled_from([b"websocket", b"Upgrade", b"13", b"8", b"dGhlIHNhbXBsZSBub25jZQ=="]),
        st.sampled_from([f"Bearer {token}".encode(), b"Bearer x", b"Basic eDp5", b"0", b"10"]),
        _text(printable, 0, 80),
        _UNSAFE,
        st.integers(1000, 9000).map(lambda n: b"x" * n),
    )
    names = st.one_of(
        st.sampled_from(
            [
                *(b"Host", b"Host", b"Origin", b"Upgrade", b"Connection", b"Sec-WebSocket-Key"),
                *(b"Sec-WebSocket-Version", b"Authorization", b"Content-Length"),
                *(b"Transfer-Encoding", b"HOST", b"host "),
            ]
        ),
        _text(printable, 1, 20),
        _UNSAFE,
    )
    header = st.tuples(names, values).map(lambda nv: nv[0] + b": " + nv[1])
    upgrade = [
        b"Upgrade: websocket",
        b"Connection: Upgrade",
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        b"Sec-WebSocket-Version: 13",
    ]

    @st.composite
    def head(draw: st.DrawFn) -> bytes:
        # A valid request (a page, the session list or a websocket with the token), then a
        # few mutations: so that every check, not only the parser, meets odd input.
        path = draw(st.sampled_from([b"/", f"/?token={token}".encode(), b"/sessions"]))
        first = [b"GET", path, b"HTTP/1.1"]
        fields = [b"Host: " + draw(st.sampled_from(own))]
        if draw(st.booleans()):
            fields += upgrade
        end = b"\r\n"
        for _ in range(draw(st.integers(0, 3))):
            mutation = draw(st.integers(0, 6))
            if mutation == 0:
                first[0] = draw(methods)
            elif mutation == 1:
                first[1] = draw(paths)
            elif mutation == 2:
                first[2] = draw(versions)
            elif mutation == 3 and fields:
                del fields[draw(st.integers(0, len(fields) - 1))]
            elif mutation == 4 and fields:
                fields.append(draw(st.sampled_from(fields)))  # a repeated header
            elif mutation == 5:
                end = b"\n"
            else:
                fields.insert(draw(st.integers(0, len(fields))), draw(header))
        return end.join([b" ".join(first), *fields]) + b"\r\n\r\n"

    return head()


def exchange(port: int, source: str, head: bytes) -> int:
    """Send one request head from ``source``; the status of its answer (0: none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.bind((source, 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(head)
        line = sock.makefile("rb").readline()
    parts = line.split()
    return int(parts[1]) if len(parts) >= 2 and parts[0] == b"HTTP/1.1" else 0


def fuzz_http(folder: Path, home: Path, examples: int, derandomize: bool) -> dict[str, object]:
    statuses: Counter[int] = Counter()
    with training(folder, "--step-sleep", "0.005") as run:
        session = wait_for_session(home)
        process = psutil.Process(run.pid)
        control = Wire(session)
        step_before = control.call("status")["data"]["step"]
        threads_before = process.num_threads()
        sent = {"n": 0}

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=derandomize,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(requests(session), min_size=10, max_size=10))
        def send(heads: list[bytes]) -> None:
            for head in heads:
                source = f"127.0.0.{2 + sent['n'] % SOURCES}"
                sent["n"] += 1
                status = exchange(session.port, source, head)
                assert deliberate(status), (head, status)
                statuses[status] += 1

        send()
        assert control.call("ping")["type"] == "reply"
        fresh = Wire(session)
        assert fresh.call("status")["data"]["step"] > step_before  # it trained throughout
        fresh.close()
        deadline = time.monotonic() + 10
        while process.num_threads() > threads_before and time.monotonic() < deadline:
            time.sleep(0.1)  # threads of the last answered requests end
        threads_after = process.num_threads()
        control.close()
        assert run.process.poll() is None, run.stderr()
    assert threads_after <= threads_before
    assert "Traceback" not in run.stderr(), run.stderr()
    return {"requests": sent["n"], "statuses": dict(sorted(statuses.items()))}


def test_fuzzed_http_requests_are_each_answered_and_change_nothing(
    onthefly_home: Path, tmp_path: Path
) -> None:
    figures = fuzz_http(tmp_path, onthefly_home, examples=30, derandomize=True)
    print("http fuzz figures:", figures)
    assert figures["requests"] == 300


@pytest.mark.stress
def test_thousands_of_fuzzed_http_requests(onthefly_home: Path, tmp_path: Path) -> None:
    figures = fuzz_http(tmp_path, onthefly_home, examples=300, derandomize=False)
    record("http_fuzz", figures)
