"""A raw websocket connection to a live session that records every answer and event.

Unlike the product's client it sends anything (garbage included), never validates what
comes back, and counts answers per id, so a test can check that every frame got exactly
one answer. It paces itself below the server's rate limit unless told to flood.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from onthefly.server.commands import TokenBucket
from onthefly.server.discovery import SessionFile

TIMEOUT = 60.0
_LOG = logging.getLogger("tests.hardening.wire")
# This test client puts the token in its URL: its handshake must not show in the logs
# that the security tests search for the token.
_LOG.setLevel(logging.WARNING)
PACE = 150.0
"""Frames per second a paced connection sends (the server allows 200, bursts of 400)."""


def ws_url(session: SessionFile) -> str:
    return f"ws://127.0.0.1:{session.port}/?token={session.token}"


class Wire:
    """One connection: ``send`` frames, then ``wait_answers`` for as many answers.

    Attributes:
        answers: every ``reply``/``error`` frame received, in order.
        events: every stream event received (``batch`` frames flattened), in order.
        notices: ``coalesced`` frames.
        snapshots: ``snapshot`` frames.
        close_code: the server's close code once the connection ended.
    """

    def __init__(self, session: SessionFile, *, paced: bool = True, **options: Any) -> None:
        # Held open as a context manager: the way websockets keeps a long-lived connection.
        self._stack = contextlib.ExitStack()
        self._ws: ClientConnection = self._stack.enter_context(
            # No keepalive pings: they draw from the global random generator, which
            # hypothesis requires to stay untouched while it generates frames.
            connect(
                ws_url(session),
                open_timeout=10,
                max_size=None,
                logger=_LOG,
                ping_interval=None,
                **options,
            )
        )
        self.hello = json.loads(self._ws.recv(timeout=10))
        self.answers: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []
        self.snapshots: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self.sent = 0
        self._bucket = TokenBucket(rate=PACE, burst=2 * PACE) if paced else None
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="wire-reader", daemon=True)
        self._reader.start()

    def send(self, wire: str | bytes) -> None:
        while self._bucket is not None and not self._bucket.allow(time.monotonic()):
            time.sleep(1 / PACE)
        self._ws.send(wire)
        self.sent += 1

    def call(self, kind: str, timeout: float = TIMEOUT, **fields: Any) -> dict[str, Any]:
        """Send a well-formed command and return its answer."""
        command_id = f"call-{time.monotonic_ns()}"
        self.send(json.dumps({"type": kind, "id": command_id, **fields}))
        return self.wait(lambda: next((a for a in self.answers if a["id"] == command_id), None))

    def counts(self) -> Counter[str | None]:
        """How many answers each id got (``None``: answers to frames without a readable id)."""
        with self._changed:
            return Counter(answer["id"] for answer in self.answers)

    def wait_answers(self, total: int, timeout: float = TIMEOUT) -> None:
        """Wait until ``total`` answers have arrived in all."""
        self.wait(lambda: len(self.answers) >= total or None, timeout)

    def wait(self, probe: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while (found := probe()) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self.close_code is not None:
                    raise AssertionError(
                        f"gave up waiting (closed: {self.close_code}); "
                        f"{len(self.answers)} answers to {self.sent} frames"
                    )
                self._changed.wait(min(left, 0.2))
            return found

    @property
    def open(self) -> bool:
        return self.close_code is None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._stack.close()
        self._reader.join(timeout=10)

    def _read(self) -> None:
        try:
            for frame in self._ws:
                self._record(json.loads(frame))
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                self.close_code = self._ws.close_code or 1006  # 1006: no close frame
                self._changed.notify_all()

    def _record(self, message: dict[str, Any]) -> None:
        with self._changed:
            kind = message["type"]
            if kind in ("reply", "error"):
                self.answers.append(message)
            elif kind == "batch":
                self.events.extend(message["events"])
            elif kind == "coalesced":
                self.notices.append(message)
            elif kind == "snapshot":
                self.snapshots.append(message)
            elif "seq" in message:
                self.events.append(message)
            self._changed.notify_all()
