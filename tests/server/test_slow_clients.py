"""The websocket transport with clients that read slowly or not at all: coalesced, then
disconnected after the stall timeout, while other clients get everything."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from websockets.sync.client import ClientConnection, connect

from onthefly.server.broker import Broker
from onthefly.server.transport import Transport, bind

from .conftest import ask, recv


@contextmanager
def _serve(broker: Broker, **kwargs: Any) -> Iterator[Transport]:
    transport = Transport(broker, token="t", dashboard_dir=None, **kwargs)
    transport.start(bind("127.0.0.1", 0))
    try:
        yield transport
    finally:
        transport.close(flush_timeout=0.5)


@contextmanager
def _stuck_client(port: int) -> Iterator[ClientConnection]:
    """A client that reads nothing: small receive buffer, four-message queue."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # Set before connecting (shrinking an open connection's buffer can stall TCP), and
    # above the loopback MSS (64 KiB): a smaller window never reopens without slow probes.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 * 1024)
    sock.connect(("127.0.0.1", port))
    url = f"ws://127.0.0.1:{port}/?token=t"
    with connect(url, sock=sock, max_queue=4, close_timeout=0.5) as ws:
        yield ws


def _publish_metrics(broker: Broker, count: int, start: int = 0) -> None:
    for first in range(start, start + count, 500):
        broker.publish(
            [
                ("main", "metrics", 1.0, {"step": s, "epoch": 0, "values": {"loss": 1.0, "x": 2.0}})
                for s in range(first, first + 500)
            ]
        )


def _started_broker(**kwargs: Any) -> Broker:
    broker = Broker("s", "p", main_run="main", **kwargs)
    info = {
        "run": "main",
        "project": "p",
        "name": "main",
        "state": "running",
        "step": 0,
        "epoch": 0,
        "started_at": 1.0,
    }
    broker.publish([("main", "run_started", 1.0, {"info": info})])
    return broker


def test_slow_client_is_coalesced_while_a_fast_one_gets_everything() -> None:
    broker = _started_broker(outbox_events=2000)
    total = 40_000
    with (
        _serve(broker, stall_timeout=5) as transport,
        _stuck_client(transport.port) as slow,
        connect(f"ws://127.0.0.1:{transport.port}/?token=t") as fast,
    ):
        for ws in (slow, fast):
            recv(ws)  # hello
            assert ask(ws, type="subscribe", id="s")["data"] == {"mode": "snapshot", "seq": 1}
            assert recv(ws)["type"] == "snapshot"
        # From here on the slow client reads nothing until the training is over.
        received: list[dict[str, Any]] = []
        reader = threading.Thread(target=_read_events, args=(fast, total, received))
        reader.start()
        for start in range(0, total, 500):
            # "Fast" by construction: never more than 1000 events ahead of this client.
            while start - _count(received) > 1000 and reader.is_alive():
                time.sleep(0.001)
            _publish_metrics(broker, 500, start=start)
        reader.join()
        # Now the slow client reads: everything it got, plus what it was told it missed.
        delivered: list[int] = []
        dropped = 0
        while len(delivered) + dropped < total:
            message = recv(slow)
            if message["type"] == "batch":
                delivered += [e["seq"] for e in message["events"]]
            elif message["type"] == "coalesced":
                dropped += message["dropped"]
    assert [m["type"] for m in received] == ["batch"] * len(received)
    assert [e["seq"] for m in received for e in m["events"]] == list(range(2, total + 2))
    assert dropped > 0
    assert delivered == sorted(set(delivered))
    assert len(delivered) + dropped == total


def _count(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("events", [])) for m in list(messages))


def _read_events(ws: ClientConnection, total: int, out: list[dict[str, Any]]) -> None:
    count = 0
    while count < total:
        message = recv(ws, timeout=20)
        out.append(message)
        count += len(message.get("events", []))


def test_a_client_that_accepts_nothing_is_disconnected_after_the_stall_timeout() -> None:
    broker = _started_broker()
    with _serve(broker, stall_timeout=0.3) as transport, _stuck_client(transport.port) as slow:
        slow.send(json.dumps({"type": "subscribe", "id": "s"}))
        deadline = time.monotonic() + 10
        sent = 0
        while broker.clients and time.monotonic() < deadline:
            _publish_metrics(broker, 2000, start=sent)
            sent += 2000
            time.sleep(0.05)
        assert broker.clients == 0
