"""The shared core of the test suites' raw websocket clients of a live session.

A ``Recorder`` connects, reads the ``hello``, then records every frame the server sends on
a reader thread until the connection ends; a test waits on what was recorded. Subclasses
decide what to keep by extending ``_record``.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from onthefly.server.discovery import SessionFile

TIMEOUT = 60.0


def ws_url(session: SessionFile) -> str:
    return f"ws://127.0.0.1:{session.port}/?token={session.token}"


def as_metrics(event: dict[str, Any]) -> list[dict[str, Any]]:
    """``event``, or for a ``steps`` event the ``metrics`` events it stands for (one per
    step, with the values that step has), sharing its envelope."""
    if event.get("type") != "steps":
        return [event]
    envelope = {k: event[k] for k in ("v", "session", "run", "seq", "time")}
    values: list[dict[str, Any]] = [{} for _ in event["steps"]]
    at = {step: index for index, step in enumerate(event["steps"])}
    for name, points in event["values"].items():
        for step, value in zip(points["steps"], points["values"], strict=True):
            values[at[step]][name] = value
    return [
        {**envelope, "type": "metrics", "split": event["split"], "step": step, "epoch": epoch,
         "values": step_values}
        for step, epoch, step_values in zip(event["steps"], event["epochs"], values, strict=True)
    ]  # fmt: skip


class Recorder:
    """One connection to ``session`` that records the stream events it receives.

    Subclasses that keep more than the events set their own state up *before* calling
    ``Recorder.__init__``: the reader thread it starts may record a frame at once.

    Attributes:
        hello: the ``hello`` frame the server greeted with.
        events: every stream event received (``batch`` frames flattened), in order (see
            :meth:`stream` for the events with training steps one by one).
        close_code: the server's close code once the connection ended.
        closed: set once the connection ended.
    """

    _stop_when_closed = False
    """Whether ``wait`` gives up as soon as the connection has ended."""

    def __init__(self, session: SessionFile, *, timeout: float, **options: Any) -> None:
        """Connect and read the hello, each within ``timeout`` seconds; ``options`` go to
        ``websockets``' ``connect``."""
        # Held open as a context manager: the way websockets keeps a long-lived connection.
        self._stack = contextlib.ExitStack()
        self._ws: ClientConnection = self._stack.enter_context(
            connect(ws_url(session), open_timeout=timeout, **options)
        )
        self.hello = json.loads(self._ws.recv(timeout=timeout))
        self.events: list[dict[str, Any]] = []
        self.close_code: int | None = None
        self.closed = threading.Event()
        self._changed = threading.Condition()
        # Named after the subclass, so a thread left running says whose it is.
        self._reader = threading.Thread(
            target=self._read, name=f"{type(self).__name__.lower()}-reader", daemon=True
        )
        self._reader.start()

    def wait(self, probe: Callable[[], Any], timeout: float = TIMEOUT) -> Any:
        """What ``probe`` returns once it is not ``None``, probing again on each frame."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (found := probe()) is None:
                left = deadline - time.monotonic()
                if left <= 0 or (self._stop_when_closed and self.close_code is not None):
                    raise AssertionError(
                        f"gave up waiting ({timeout} s; closed: {self.close_code}); "
                        f"{self._progress()}"
                    )
                self._changed.wait(min(left, 0.2))
            return found

    def wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = TIMEOUT
    ) -> dict[str, Any]:
        """The first recorded event matching ``predicate`` (training steps one by one, see
        :meth:`stream`), waiting for it."""
        return self.wait(lambda: next((e for e in self.stream() if predicate(e)), None), timeout)

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self._reader.join(timeout=10)

    def _progress(self) -> str:
        """What was received so far, for the message of a ``wait`` that gave up."""
        return f"{len(self.events)} events"

    def _record(self, message: dict[str, Any]) -> None:
        """Keep ``message``; called with ``_changed`` held, which is notified after."""
        if message["type"] == "batch":
            self.events.extend(message["events"])
        elif "seq" in message:
            self.events.append(message)

    def stream(self) -> list[dict[str, Any]]:
        """The events as the Python client hands them out: a ``steps`` event as its ``metrics``
        events (call with ``_changed`` held, or from the thread that waits)."""
        return [item for event in self.events for item in as_metrics(event)]

    def _read(self) -> None:
        try:
            for frame in self._ws:
                message = json.loads(frame)
                with self._changed:
                    self._record(message)
                    self._changed.notify_all()
        except ConnectionClosed:
            pass
        finally:
            with self._changed:
                self.close_code = self._ws.close_code or 1006  # 1006: no close frame
                self.closed.set()
                self._changed.notify_all()
