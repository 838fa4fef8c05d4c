"""A raw websocket connection to a live session that records every answer and event.

Unlike the product's client it sends anything (garbage included), never validates what
comes back, and counts answers per id, so a test can check that every frame got exactly
one answer. It paces itself below the server's rate limit unless told to flood.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections import Counter
from typing import Any

from onthefly.server.commands import TokenBucket
from onthefly.server.discovery import SessionFile
from tests.ws_recorder import TIMEOUT, Recorder
from tests.ws_recorder import ws_url as ws_url  # re-exported: the tests build raw URLs

_LOG = logging.getLogger("tests.hardening.wire")
# This test client puts the token in its URL: its handshake must not show in the logs
# that the security tests search for the token.
_LOG.setLevel(logging.WARNING)
PACE = 150.0
"""Frames per second a paced connection sends (the server allows 200, bursts of 400)."""


class Wire(Recorder):
    """One connection: ``send`` frames, then ``wait_answers`` for as many answers.

    Attributes:
        answers: every ``reply``/``error`` frame received, in order.
        events: every stream event received (``batch`` frames flattened), in order.
        notices: ``coalesced`` frames.
        snapshots: ``snapshot`` frames.
        close_code: the server's close code once the connection ended.
    """

    # A closed connection answers nothing more: fail at once rather than at the timeout.
    _stop_when_closed = True

    def __init__(self, session: SessionFile, *, paced: bool = True, **options: Any) -> None:
        self.answers: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []
        self.snapshots: list[dict[str, Any]] = []
        self.sent = 0
        self._bucket = TokenBucket(rate=PACE, burst=2 * PACE) if paced else None
        # No keepalive pings: they draw from the global random generator, which
        # hypothesis requires to stay untouched while it generates frames.
        super().__init__(
            session, timeout=10, max_size=None, logger=_LOG, ping_interval=None, **options
        )

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

    @property
    def open(self) -> bool:
        return self.close_code is None

    def close(self) -> None:
        # The server may already have dropped a connection that was fed garbage: ending
        # the test must not fail on it.
        with contextlib.suppress(Exception):
            super().close()

    def _progress(self) -> str:
        return f"{len(self.answers)} answers to {self.sent} frames"

    def _record(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind in ("reply", "error"):
            self.answers.append(message)
        elif kind == "coalesced":
            self.notices.append(message)
        elif kind == "snapshot":
            self.snapshots.append(message)
        else:
            super()._record(message)
