"""Session server costs: the training thread's publish() and end-to-end delivery rates.

* ``publish``: µs per event on the training thread, next to a bare ``deque.append`` of the
  same tuple measured in the same run (the floor any buffer pays).
* delivery: events/s from ``publish()`` until every subscribed client has received them
  all, with one and with four clients (target: 20,000 events/s or more).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

from onthefly.protocol import MetricsBody
from onthefly.server import SessionServer

EVENTS = 20_000
PUBLISHES_PER_ROUND = 10_000


@pytest.fixture
def server() -> Iterator[SessionServer]:
    with SessionServer("bench", "main", port=0, quiet=True) as started:
        yield started


def _values(step: int) -> dict[str, float]:
    return {"loss": 1.0 / (step + 1), "lr": 1e-3, "grad_norm": 0.5}


def test_publish_cost_on_the_training_thread(benchmark: Any, server: SessionServer) -> None:
    bare: deque[tuple[Any, ...]] = deque()
    values = _values(1)
    started = time.perf_counter()
    for step in range(PUBLISHES_PER_ROUND):
        bare.append((server.main_run, "metrics", time.time(), {"step": step, "values": values}))
    baseline_us = (time.perf_counter() - started) / PUBLISHES_PER_ROUND * 1e6

    # The bodies are built beforehand: this measures the server's part (building a body is
    # the caller's, ~3 µs).
    bodies = [MetricsBody(step=step, epoch=0, values=values) for step in range(PUBLISHES_PER_ROUND)]

    def publish_many() -> None:
        for body in bodies:
            server.publish(server.main_run, body)

    benchmark.pedantic(publish_many, rounds=20, iterations=1, warmup_rounds=1)
    per_event_us = benchmark.stats.stats.median / PUBLISHES_PER_ROUND * 1e6
    benchmark.extra_info.update(
        {
            "us_per_event": per_event_us,
            "bare_append_us": baseline_us,
            "ratio_to_bare_append": per_event_us / baseline_us,
        }
    )
    assert per_event_us < 5.0


class _Reader:
    """A subscribed client counting the events it receives, on its own thread."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.last_seq = 0
        self.dropped = 0
        self.reached = threading.Event()
        self.target = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self.ws.send(json.dumps({"type": "subscribe", "id": "s"}))
        self._thread.start()

    def _run(self) -> None:
        for frame in self.ws:
            message = json.loads(frame)
            if message["type"] == "batch":
                self.last_seq = message["events"][-1]["seq"]
            elif message["type"] == "snapshot":
                self.last_seq = message["seq"]
            elif message["type"] == "coalesced":
                self.dropped += message["dropped"]
            if self.target and self.last_seq >= self.target:
                self.reached.set()


@pytest.mark.parametrize("clients", [1, 4])
def test_events_per_second_delivered(benchmark: Any, server: SessionServer, clients: int) -> None:
    with _Clients(server, clients) as readers:
        step = 0

        def deliver() -> None:
            nonlocal step
            target = readers[0].last_seq + EVENTS
            for reader in readers:
                reader.target = target
                reader.reached.clear()
            for _ in range(EVENTS):
                server.publish(
                    server.main_run, MetricsBody(step=step, epoch=0, values=_values(step))
                )
                step += 1
            for reader in readers:
                assert reader.reached.wait(60), "events did not all arrive"

        benchmark.pedantic(deliver, rounds=5, iterations=1, warmup_rounds=1)
        rate = EVENTS / benchmark.stats.stats.median
        benchmark.extra_info.update({"events_per_s": rate, "clients": clients})
        assert all(reader.dropped == 0 for reader in readers)
    assert rate >= 20_000


class _Clients:
    """``count`` subscribed readers, connected on entry and closed on exit."""

    def __init__(self, server: SessionServer, count: int) -> None:
        self._server = server
        self._count = count
        self._connections: list[ClientConnection] = []

    def __enter__(self) -> list[_Reader]:
        readers = []
        for _ in range(self._count):
            ws = connect(self._server.ws_url).__enter__()
            self._connections.append(ws)
            ws.recv()  # hello
            readers.append(_Reader(ws))
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + 10
        while any(r.last_seq == 0 for r in readers) and time.monotonic() < deadline:
            time.sleep(0.01)
        return readers

    def __exit__(self, *exc: object) -> None:
        for ws in self._connections:
            ws.__exit__(None, None, None)
