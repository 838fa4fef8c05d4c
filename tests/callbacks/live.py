"""A small real websocket client of a live session, for the callback tests.

It finds the session through its discovery file, subscribes from the first event, records
every stream event (batches flattened) on a reader thread, and sends commands.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

from onthefly.server.discovery import SessionFile, list_sessions
from tests.ws_recorder import TIMEOUT, Recorder


def wait_for_session(home: Path, timeout: float = TIMEOUT) -> SessionFile:
    """The first live session under ``home``, waiting for it to appear."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = list_sessions(home)
        if sessions:
            return sessions[0]
        time.sleep(0.05)
    raise AssertionError(f"no session appeared under {home} within {timeout} s")


def session_files(home: Path) -> list[str]:
    folder = home / "sessions"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


class LiveClient(Recorder):
    """Connects, subscribes with ``since=0`` and records events until closed.

    Attributes:
        answers: the ``reply``/``error`` frame of each command, by command id.
        closed: set once the connection ended.
    """

    def __init__(self, session: SessionFile) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1)
        # Generous: the run may still be starting up in this very process, busy with imports.
        super().__init__(session, timeout=TIMEOUT)
        self.call("subscribe", since=0)

    def send(self, kind: str, **fields: Any) -> str:
        """Send a command; returns its id."""
        command_id = f"c{next(self._ids)}"
        self._ws.send(json.dumps({"type": kind, "id": command_id, **fields}))
        return command_id

    def call(self, kind: str, timeout: float = TIMEOUT, **fields: Any) -> dict[str, Any]:
        """Send a command and wait for its reply or error frame."""
        command_id = self.send(kind, **fields)
        return self.wait(lambda: self.answers.get(command_id), timeout)

    def of(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        """Recorded events of type ``kind`` whose fields equal ``match`` (training steps one by
        one, as the Python client hands them out)."""
        with self._changed:
            return [
                e
                for e in self.stream()
                if e["type"] == kind and all(e.get(k) == v for k, v in match.items())
            ]

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]

    def _progress(self) -> str:
        return f"events: {self.kinds()}"

    def _record(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind in ("reply", "error") and message.get("id"):
            self.answers[message["id"]] = message
        elif kind != "snapshot":  # a subscription's snapshot carries a seq but is no event
            super()._record(message)
