"""Load: four clients on a run that streams as fast as it trains, for ten minutes (stress).

The native run trains without any pause (every step publishes its metrics) and records its
step and memory (RSS) every second. For the first fifth of the time no client is connected
(the baseline); then four clients subscribe and read until the end. One of them
reads slower than the run publishes, so that the server's slow-client policy
(``onthefly/server/outbox.py``: queued telemetry beyond a bound is dropped and a
``coalesced`` notice says which ``seq`` range) must act.

Checked: the run ends normally; its memory stays within the bound below; its steps per
second with four clients stay close to those with none; the three readers that keep up get
every event exactly once, in order; the one that falls behind gets every event except
telemetry inside the ranges it was told about, in order, none twice, and stays connected
to the end.

``ONTHEFLY_LOAD_SECONDS`` sets the duration (default 600).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from onthefly.server.discovery import SessionFile
from onthefly.server.outbox import TELEMETRY_KINDS
from tests.callbacks.live import wait_for_session
from tests.hardening.figures import record
from tests.hardening.process import training
from tests.hardening.wire import Wire, ws_url

SECONDS = float(os.environ.get("ONTHEFLY_LOAD_SECONDS", "600"))
CLIENTS = 4
RSS_GROWTH_BOUND = 256 << 20
"""Most the training process's memory may grow while the four clients watch (bytes)."""
SLOW_DELAY = 0.005
"""Seconds the slow reader spends on each event (200 events/s: the run publishes more)."""
SLOWDOWN_BOUND = 0.75
"""Least steps per second with four clients, as a fraction of those with none."""

_LOG = logging.getLogger("tests.hardening.load")
_LOG.setLevel(logging.WARNING)
_KINDS = ["", "metrics", "steps", "runtime", "log", "status", "epoch", "other"]
"""Event kinds by code (0: not received)."""


@dataclass
class Reader:
    """One client: subscribes, then checks its stream as it reads it.

    With ``delay`` it spends that long on each event until ``done`` is set: slower than the
    run publishes, so its queue on the server grows.
    """

    session: SessionFile
    delay: float = 0.0
    first: int = 0
    kinds: bytearray = field(default_factory=bytearray)  # per seq: kind code, 0 = not seen
    gaps: list[tuple[int, int]] = field(default_factory=list)
    disorder: int = 0
    last: int = 0
    close_code: int | None = None
    ended_at: float = 0.0

    def run(self, done: threading.Event) -> None:
        sock = socket.socket()
        if self.delay:  # a reader that buffers little: its backlog stays on the server
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 14)
        sock.connect(("127.0.0.1", self.session.port))
        # No keepalive pings of its own (a reader that lags would time them out itself), and
        # one frame read ahead at most, so it takes data from its socket at its own pace.
        options: dict[str, Any] = {"max_size": None, "logger": _LOG, "ping_interval": None}
        options["max_queue"] = 1 if self.delay else 16
        with connect(ws_url(self.session), sock=sock, open_timeout=10, **options) as ws:
            json.loads(ws.recv(timeout=10))  # hello
            ws.send(json.dumps({"type": "subscribe", "id": "s"}))
            try:
                for frame in ws:
                    taken = self._take(json.loads(frame))
                    if self.delay and not done.is_set():
                        time.sleep(self.delay * taken)
            except ConnectionClosed:
                pass
            self.close_code = ws.close_code
            self.ended_at = time.time()

    def _take(self, message: dict[str, Any]) -> int:
        """Record one frame; returns how many events it held."""
        kind = message["type"]
        if kind == "snapshot":
            self.first = self.last = message["seq"]
        elif kind == "coalesced":
            self.gaps.append((message["from_seq"], message["to_seq"]))
        elif kind == "batch":
            for event in message["events"]:
                self._event(event["seq"], event["type"])
            return len(message["events"])
        return 0

    def _event(self, seq: int, kind: str) -> None:
        if seq <= self.last:
            self.disorder += 1
        self.last = max(self.last, seq)
        if len(self.kinds) <= seq:
            self.kinds.extend(bytes(seq + 100_000 - len(self.kinds)))
        self.kinds[seq] = _KINDS.index(kind) if kind in _KINDS else len(_KINDS) - 1

    def missing(self, upto: int) -> list[int]:
        """The seqs after its snapshot that it did not get."""
        seen = self.kinds
        return [s for s in range(self.first + 1, upto + 1) if s >= len(seen) or not seen[s]]


def _rate(lines: list[dict[str, Any]], start: float, end: float) -> float:
    window = [line for line in lines if start <= line["t"] <= end]
    assert len(window) >= 3, (start, end, len(lines))
    return (window[-1]["step"] - window[0]["step"]) / (window[-1]["t"] - window[0]["t"])


@pytest.mark.stress
@pytest.mark.timeout(SECONDS + 300)
def test_four_clients_at_full_rate(onthefly_home: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    baseline = max(10.0, SECONDS / 5)
    with training(tmp_path, "--report", str(report)) as run:
        session = wait_for_session(onthefly_home)
        started = time.time()
        time.sleep(baseline)
        loaded = time.time()
        readers = [Reader(session) for _ in range(CLIENTS - 1)]
        readers.append(Reader(session, delay=SLOW_DELAY))
        done = threading.Event()
        threads = [threading.Thread(target=r.run, args=(done,), daemon=True) for r in readers]
        for thread in threads:
            thread.start()
        time.sleep(SECONDS - baseline)
        ended = time.time()
        done.set()  # the slow reader catches up before the run ends
        control = Wire(session)
        seq = control.call("ping")["data"]["seq"]
        deadline = time.monotonic() + 120
        while readers[-1].last < seq and readers[-1].close_code is None:
            assert time.monotonic() < deadline, "the slow reader neither caught up nor ended"
            time.sleep(0.1)
        stopped = control.call("stop")
        assert stopped["type"] == "reply"
        assert run.wait(timeout=120) == 0, run.stderr()
        for thread in threads:
            thread.join(timeout=120)
        control.close()
    assert "Traceback" not in run.stderr() and "Exception in thread" not in run.stderr()

    lines = [json.loads(line) for line in report.read_text().splitlines()]
    warm = started + 5
    idle_rate = _rate(lines, warm, loaded)
    busy_rate = _rate(lines, loaded + 5, ended)
    at_load = [line["rss"] for line in lines if line["t"] <= loaded][-1]
    peak = max(line["rss"] for line in lines)
    last_seq = max(r.last for r in readers)
    steady = readers[0]
    figures = {
        "seconds": SECONDS,
        "steps": lines[-1]["step"],
        "events": last_seq,
        "steps_per_s_idle": round(idle_rate, 1),
        "steps_per_s_4_clients": round(busy_rate, 1),
        "ratio": round(busy_rate / idle_rate, 3),
        "rss_at_load_mb": round(at_load / 2**20, 1),
        "rss_peak_mb": round(peak / 2**20, 1),
        "rss_growth_mb": round((peak - at_load) / 2**20, 1),
        "rss_median_mb": round(statistics.median(line["rss"] for line in lines) / 2**20, 1),
        "coalesced_notices": len(readers[-1].gaps),
        "telemetry_skipped": len(readers[-1].missing(readers[-1].last)),
        "slow_reader_close": readers[-1].close_code,
        "slow_reader_reached_end": readers[-1].last == last_seq,
    }
    record("load", figures)

    for reader in readers:
        assert reader.disorder == 0  # in order, none twice
    for reader in readers[:-1]:  # the readers that keep up get everything, to the end
        assert reader.last == last_seq and reader.missing(last_seq) == [] and not reader.gaps
        assert reader.close_code == 1001  # "session closed"
    slow = readers[-1]
    assert slow.gaps, "the slow reader never fell behind"
    for seq in slow.missing(slow.last):  # what it lacks was telemetry it was told about
        assert any(lo <= seq <= hi for lo, hi in slow.gaps), seq
        if seq > steady.first:
            assert _KINDS[steady.kinds[seq]] in TELEMETRY_KINDS, seq
    assert slow.last == last_seq and slow.close_code == 1001, figures  # kept to the end
    assert peak - at_load <= RSS_GROWTH_BOUND, figures
    assert busy_rate >= SLOWDOWN_BOUND * idle_rate, figures
