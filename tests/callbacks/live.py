"""A small real websocket client of a live session, for the callback tests.

It finds the session through its discovery file, subscribes from the first event, records
every stream event (batches flattened) on a reader thread, and sends commands.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from onthefly.server.discovery import SessionFile, list_sessions

TIMEOUT = 60.0


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


class LiveClient:
    """Connects, subscribes with ``since=0`` and records events until closed."""

    def __init__(self, session: SessionFile) -> None:
        self._stack = contextlib.ExitStack()
        self._ws: ClientConnection = self._stack.enter_context(
            connect(f"ws://127.0.0.1:{session.port}/?token={session.token}", open_timeout=TIMEOUT)
        )
        # Generous: the run may still be starting up in this very process, busy with imports.
        self.hello = json.loads(self._ws.recv(timeout=TIMEOUT))
        self.events: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}
        self.closed = threading.Event()
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
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

    def wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT
    ) -> dict[str, Any]:
        """The first recorded event matching ``predicate``, waiting for it."""
        return self.wait(lambda: next((e for e in self.events if predicate(e)), None), timeout)

    def wait(self, probe: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = probe()
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out after {timeout} s; events: {self.kinds()}")
                self._changed.wait(min(left, 0.2))

    def of(self, kind: str, **match: Any) -> list[dict[str, Any]]:
        """Recorded events of type ``kind`` whose fields equal ``match``."""
        with self._changed:
            return [
                e
                for e in self.events
                if e["type"] == kind and all(e.get(k) == v for k, v in match.items())
            ]

    def kinds(self) -> list[str]:
        return [e["type"] for e in self.events]

    def close(self) -> None:
        self._stack.close()
        self._reader.join(timeout=10)

    def _read(self) -> None:
        try:
            for frame in self._ws:
                self._record(json.loads(frame))
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()
            with self._changed:
                self._changed.notify_all()

    def _record(self, message: dict[str, Any]) -> None:
        with self._changed:
            kind = message["type"]
            if kind in ("reply", "error") and message.get("id"):
                self.answers[message["id"]] = message
            elif kind == "batch":
                self.events.extend(message["events"])
            elif "seq" in message and kind not in ("snapshot",):
                self.events.append(message)
            self._changed.notify_all()
