"""One live session followed by the hub: its whole history and its live stream, kept here.

A :class:`Mirror` is a client of the session (a *relay*: it does not keep the run open at its
end) that subscribes from the start and folds everything into a local
:class:`~onthefly.server.broker.Broker`. Browser tabs of the hub are clients of that broker:
they get snapshots, history and the live stream from it, never from the run, so the run's
own token stays in the hub. Control commands go the other way: the local broker hands them
to its inbox like a training thread's, and the mirror forwards each one to the run and
answers it with the run's reply.

When the run's process ends, the mirror keeps its broker, read-only: whatever the run
showed stays viewable in the hub. Runs the process never reported finished (it was
killed) are marked finished with that reason.

Threads: a reader (connects, reconnects with ``since`` while the process lives, feeds the
broker) and a forwarder (the broker's inbox to the run).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import queue
import threading
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from onthefly.protocol import Command, Snapshot
from onthefly.server.broker import Broker
from onthefly.server.discovery import SessionFile
from onthefly.server.pending import PendingCommand
from onthefly.server.staging import RawEvent

log = logging.getLogger(__name__)

_ENVELOPE = frozenset({"v", "session", "run", "seq", "time", "type"})
_CONNECT_TIMEOUT = 5.0
_MAX_BACKOFF = 2.0

ENDED = (
    "this run's process has ended; the hub keeps what it showed, read-only (start the run "
    "again, or resume it from an export, to train on)"
)


class Mirror:
    """The hub's copy of one session, kept up to date while its process lives.

    Args:
        session: the session's discovery file.

    Attributes:
        session: the discovery file it follows.
        live: whether the process still runs (``False`` after :meth:`end`).
        ended_at: when :meth:`end` was called (UNIX time), or ``None``.

    Example:
        >>> mirror = Mirror(session_file)  # doctest: +SKIP
        >>> mirror.start(); mirror.wait_ready(5)  # doctest: +SKIP
        >>> mirror.broker.run_infos()[0].state  # doctest: +SKIP
        'running'
    """

    def __init__(self, session: SessionFile) -> None:
        self.session = session
        self.live = True
        self.ended_at: float | None = None
        self.project = session.project
        self._broker: Broker | None = None
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._socket: ClientConnection | None = None
        self._send_lock = threading.Lock()
        self._upstream_seq = 0
        self._ids = itertools.count(1)
        self._waiting: dict[str, PendingCommand] = {}
        self._lock = threading.Lock()
        name = f"onthefly-hub-{session.pid}-{session.port}"
        self._reader = threading.Thread(target=self._read, name=name, daemon=True)
        self._forwarder = threading.Thread(target=self._forward, name=f"{name}-cmd", daemon=True)

    @property
    def key(self) -> str:
        """``<pid>-<port>``: the session's key, as the discovery file names it."""
        return f"{self.session.pid}-{self.session.port}"

    @property
    def broker(self) -> Broker | None:
        """The local copy of the session, once its first snapshot arrived."""
        return self._broker

    def start(self) -> None:
        """Start following the session."""
        self._reader.start()
        self._forwarder.start()

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the first snapshot arrived; returns whether it did."""
        return self._ready.wait(timeout)

    def end(self) -> None:
        """The session's process is gone: keep what it showed, read-only."""
        with self._lock:
            if not self.live:
                return
            self.live = False
            self.ended_at = time.time()
        self._stop.set()
        self._drop_socket()
        broker = self._broker
        if broker is None:
            return
        unfinished = [info for info in broker.run_infos() if info.state != "finished"]
        now = time.time()
        broker.publish(
            [
                (
                    info.run,
                    "status",
                    now,
                    {
                        "state": "finished",
                        "step": info.step,
                        "epoch": info.epoch,
                        "reason": "the training process ended without finishing the run",
                    },
                )
                for info in unfinished
            ]
        )
        broker.read_only = ENDED
        broker.close()
        self._fail_waiting("session_closed", "the run's process ended before answering")

    def close(self) -> None:
        """Stop the threads (the hub shuts down)."""
        self._stop.set()
        self._drop_socket()
        for thread in (self._reader, self._forwarder):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join(timeout=5.0)

    # ----------------------------------------------------------------------------- reading

    def _read(self) -> None:
        backoff = 0.25
        while not self._stop.is_set():
            try:
                self._follow()
                backoff = 0.25
            except (OSError, ConnectionClosed, InvalidHandshake, TimeoutError) as exc:
                if self._stop.is_set():
                    return
                log.debug("hub: %s unreachable (%s); retrying", self.key, exc)
            except Exception:  # a bug must not take the hub down: this session stops updating
                log.exception("hub: following %s failed", self.key)
                return
            finally:
                self._fail_waiting("session_closed", "the connection to the run was lost")
            self._stop.wait(backoff)
            backoff = min(_MAX_BACKOFF, backoff * 2)

    def _follow(self) -> None:
        """One connection: hello, subscribe (from the start, or since what we have), frames."""
        url = f"ws://127.0.0.1:{self.session.port}/"
        headers = {"Authorization": f"Bearer {self.session.token}"}
        with connect(
            url, additional_headers=headers, open_timeout=_CONNECT_TIMEOUT, max_size=None
        ) as socket:
            self._socket = socket
            hello = json.loads(socket.recv(timeout=_CONNECT_TIMEOUT))
            self.project = str(hello.get("project", self.project))
            since = self._upstream_seq if self._broker is not None else None
            subscribe = {"type": "subscribe", "id": "hub", "relay": True}
            if since is not None:
                subscribe["since"] = since
            self._send(subscribe)
            while not self._stop.is_set():
                try:
                    frame = socket.recv(timeout=1.0)
                except TimeoutError:
                    continue
                self._receive(json.loads(frame))

    def _receive(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "snapshot":
            self._snapshot(Snapshot.model_validate(message))
        elif kind == "batch":
            self._publish(message["events"])
        elif kind in ("reply", "error"):
            self._answer(message)
        elif kind == "coalesced":
            # The hub read too slowly: those telemetry events are not in its copy.
            log.warning("hub: %s skipped %s telemetry events", self.key, message.get("dropped"))
            self._upstream_seq = max(self._upstream_seq, int(message["to_seq"]))
        elif kind != "hello":
            self._publish([message])

    def _snapshot(self, snapshot: Snapshot) -> None:
        broker = self._broker
        if broker is None:
            main = next((run.run for run in snapshot.runs if run.parent is None), None)
            broker = Broker(snapshot.session, self.project, main_run=main or self.session.run)
        # A second snapshot (the run's replay ring no longer held our position) replaces the
        # runs it carries; tabs already watching see the stream go on from there.
        broker.preload(snapshot)
        self._upstream_seq = snapshot.seq
        if self._broker is None:
            self._broker = broker
            self._ready.set()

    def _publish(self, events: list[dict[str, Any]]) -> None:
        broker = self._broker
        if broker is None or not events:
            return
        raw: list[RawEvent] = []
        for event in events:
            seq = int(event.get("seq", 0))
            if seq <= self._upstream_seq:
                continue  # a replayed event we already hold
            self._upstream_seq = seq
            payload = {k: v for k, v in event.items() if k not in _ENVELOPE}
            raw.append((event["run"], event["type"], float(event["time"]), payload))
        broker.publish(raw)

    # ----------------------------------------------------------------------------- commands

    def _forward(self) -> None:
        while not self._ready.wait(0.5):
            if self._stop.is_set():
                return
        broker = self._broker
        assert broker is not None
        while not (self._stop.is_set() and broker.inbox.empty()):
            try:
                pending = broker.inbox.get(timeout=0.5)
            except queue.Empty:
                continue
            self._send_upstream(pending)

    def _send_upstream(self, pending: PendingCommand) -> None:
        if not self.live:
            pending.fail("session_closed", ENDED)
            return
        command_id = f"h{next(self._ids)}"
        frame = _frame_of(pending.command, command_id, pending.run)
        with self._lock:
            self._waiting[command_id] = pending
        try:
            self._send(frame)
        except (OSError, ConnectionClosed):
            with self._lock:
                self._waiting.pop(command_id, None)
            pending.fail("session_closed", "the hub is not connected to the run right now")

    def _answer(self, message: dict[str, Any]) -> None:
        with self._lock:
            pending = self._waiting.pop(str(message.get("id")), None)
        if pending is None:
            return  # our subscribe's reply, or a command already failed
        if message["type"] == "reply":
            pending.relay(message.get("data", {}))
        else:
            error = message["error"]
            pending.fail(error["code"], error["message"])

    def _fail_waiting(self, code: Any, message: str) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, {}
        for pending in waiting.values():
            pending.fail(code, message)

    def _send(self, frame: dict[str, Any]) -> None:
        socket = self._socket
        if socket is None:
            raise OSError("not connected")
        with self._send_lock:
            socket.send(json.dumps(frame))

    def _drop_socket(self) -> None:
        socket, self._socket = self._socket, None
        if socket is not None:
            with contextlib.suppress(Exception):
                socket.close()


def _frame_of(command: Command, command_id: str, run: str) -> dict[str, Any]:
    """A command as the run must get it: its fields, the hub's id, the resolved run."""
    frame: dict[str, Any] = command.model_dump(mode="json")
    frame.update(id=command_id, run=run)
    return frame
