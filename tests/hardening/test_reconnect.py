"""Reconnects and backfill: a client that keeps dropping its connection misses nothing.

A client resumes by subscribing with ``since`` = the ``seq`` of the last event it handled;
the server replays the events after it from its ring, then the live stream follows (see
``Broker._subscribe``). Here one client drops and reopens its connection 100 times at random
moments of a real training run (before subscribing, before the reply, in the middle of the
stream; closing cleanly or cutting the socket), while another stays connected throughout.
Both must end with the same events: every ``seq`` from 1 to the last, none twice.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from onthefly.server.discovery import SessionFile
from tests.hardening.figures import record
from tests.hardening.thread_run import live_run
from tests.hardening.wire import Wire, ws_url

RECONNECTS = 100


class Resuming:
    """A client that resumes from the last ``seq`` it handled after every reconnect."""

    def __init__(self, session: SessionFile) -> None:
        self.session = session
        self.seqs: list[int] = []
        self.modes: list[str] = []
        self.subscribes = 0
        self.resumed = threading.Event()
        """Set at each resume's reply: the server is then streaming to this client."""

    @property
    def last(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def visit(self, rng: random.Random, stay: float | None) -> None:
        """Connect, resume, read for ``stay`` seconds (``None``: until the run finishes), and
        drop the connection at a random point."""
        with connect(ws_url(self.session), open_timeout=10, max_size=None) as ws:
            json.loads(ws.recv(timeout=10))  # hello
            if stay is not None and rng.random() < 0.1:
                return  # gone before subscribing
            ws.send(json.dumps({"type": "subscribe", "id": "s", "since": self.last}))
            self.subscribes += 1
            deadline = None if stay is None else time.monotonic() + stay
            with contextlib.suppress(TimeoutError, ConnectionClosed):
                while not self._handle(json.loads(ws.recv(timeout=_left(deadline)))):
                    pass
            if rng.random() < 0.5:  # cut the socket rather than closing politely
                with contextlib.suppress(OSError):  # unless the server closed it first
                    ws.socket.shutdown(socket.SHUT_RDWR)

    def _handle(self, message: dict[str, Any]) -> bool:
        """Take one frame; ``True`` once the run finished."""
        if message["type"] == "reply":
            self.modes.append(message["data"]["mode"])
            self.resumed.set()
            return False
        events = message["events"] if message["type"] == "batch" else [message]
        for event in events:
            self.seqs.append(event["seq"])
        return any(e["type"] == "status" and e["state"] == "finished" for e in events)


def _left(deadline: float | None) -> float:
    return 60.0 if deadline is None else max(deadline - time.monotonic(), 0.0)


def test_a_hundred_reconnects_miss_and_repeat_nothing(onthefly_home: Path, tmp_path: Path) -> None:
    with live_run(onthefly_home, tmp_path, step_sleep=0.002) as session:
        steady = Wire(session)
        assert steady.call("subscribe", since=0)["data"]["mode"] == "replay"
        resuming = Resuming(session)
        rng = random.Random(0)
        for _ in range(RECONNECTS):
            resuming.visit(rng, stay=rng.choice([0.0, 0.001, 0.005, 0.02, 0.05]))
            time.sleep(rng.choice([0.0, 0.002, 0.01]))  # events go on while it is away
        control = Wire(session)
        resuming.resumed.clear()
        last_visit = threading.Thread(target=resuming.visit, args=(rng, None))
        last_visit.start()
        # Stopped only once the last visit is subscribed: the session closes when the run
        # ends, and a visit that came later would find no server rather than the last events.
        assert resuming.resumed.wait(timeout=30)
        assert control.call("stop")["type"] == "reply"
        last_visit.join(timeout=60)
        steady.wait(lambda: any(e.get("state") == "finished" for e in steady.events))
    expected = list(range(1, steady.events[-1]["seq"] + 1))
    assert [e["seq"] for e in steady.events] == expected
    assert resuming.seqs == expected
    assert set(resuming.modes) == {"replay"}  # every resume was served from the ring
    assert resuming.subscribes >= RECONNECTS * 0.8  # most visits resumed, some left at once
    figures = {"reconnects": RECONNECTS, "resumes": resuming.subscribes, "events": len(expected)}
    record("reconnects", {**figures, "gaps": 0, "duplicates": 0})
