"""The session server a training process starts for its dashboards.

It wires the pieces: a publish buffer the training thread appends to, a pump thread that
drains it into the :class:`~onthefly.server.broker.Broker` every ~50 ms (at once for an
event that is not one of the streams: a status change, an alert, a result), the websocket
:class:`~onthefly.server.transport.Transport`, and the discovery file that lets the CLI,
the Python client and VS Code find the session.
"""

from __future__ import annotations

import atexit
import os
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from onthefly import environment
from onthefly.errors import ConfigurationError
from onthefly.flagged_queue import FlaggedQueue
from onthefly.protocol import EventBody, LogBody, LogRecord, RunInfo, RunStartedBody, Snapshot
from onthefly.server.admission import Limits
from onthefly.server.broker import Broker
from onthefly.server.console import announce, dashboard_kind
from onthefly.server.discovery import SessionFile, remove_session, write_session
from onthefly.server.pending import PendingCommand
from onthefly.server.staging import RawEvent
from onthefly.server.transport import Transport, bind

DEFAULT_PORT = 47621
HOST = "127.0.0.1"
PUMP_INTERVAL = 0.05
"""Seconds between two drains of the publish buffer. Each drain costs the process CPU time
that the training thread loses (the pump holds the GIL, and shares the cores): the per-step
streams are drained in batches."""

STREAMS = frozenset({"metrics", "steps", "log", "runtime", "epoch"})
"""Event types published steadily (per step, per log line, per second, per epoch): they wait
for the next drain; any other event (a status, an alert, a command's result) wakes the pump.
Waking it costs the training thread a lock hand-over, ~40 µs at an epoch start."""

BUFFER_SIZE = 250_000
"""Events the training thread may get ahead of the pump before events are dropped."""

_CHUNK = 2000  # events per broker call, so commands never wait long for the broker's lock
_DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"


class SessionServer:
    """Serves one training process's runs to dashboards, on 127.0.0.1 only.

    Args:
        project: the project name shown by dashboards and the CLI.
        run_name: the name of the main run (created with the server).
        port: the first port to try; ``None`` reads ``ONTHEFLY_PORT``, else 47621. A taken
            port moves on to the next free one; ``0`` takes any free port.
        host: must be ``"127.0.0.1"``: the session is never reachable from the network.
        home: the OnTheFly home for the discovery file (default ``$ONTHEFLY_HOME`` or
            ``~/.onthefly``).
        dashboard_dir: the built dashboard served at ``/`` (default: the package's
            ``onthefly/dashboard/``).
        quiet: do not print the dashboard address and connections.
        viewing: the exported session file a read-only server shows (named in the discovery
            file, so that the CLI tells it apart from the live run it came from).
        read_only: serve history only: control commands are refused as ``unsupported``
            with this message (``onthefly view`` of a session file).
        limits: the connection limits (see :mod:`onthefly.server.admission`).

    Raises:
        ConfigurationError: a host other than 127.0.0.1, or a port outside 0-65535.

    Example:
        >>> with SessionServer("mnist", "baseline") as server:  # doctest: +SKIP
        ...     for step in range(1000):
        ...         loss = {"loss": 1 / (step + 1)}
        ...         server.publish(server.main_run, MetricsBody(step=step, epoch=0, values=loss))
        ...         while not server.inbox.empty():
        ...             server.inbox.get_nowait().relay({"step": step})
    """

    def __init__(
        self,
        project: str,
        run_name: str,
        *,
        port: int | None = None,
        host: str = HOST,
        home: str | os.PathLike[str] | None = None,
        dashboard_dir: Path | None = None,
        quiet: bool = False,
        viewing: str | None = None,
        read_only: str | None = None,
        limits: Limits | None = None,
    ) -> None:
        if host != HOST:
            raise ConfigurationError(
                f"host {host!r} is not allowed; expected {HOST!r} (the session server "
                "only listens on the loopback interface)"
            )
        self.project = project
        self._requested_port = environment.port(port, "ONTHEFLY_PORT", DEFAULT_PORT)
        self._home = home
        self._quiet = quiet
        self._viewing = viewing
        self.session_id = secrets.token_hex(6)
        self.token = secrets.token_urlsafe(24)
        self.port = 0
        self._run_ids: set[str] = set()
        self._runs_lock = threading.Lock()
        self.main_run = self._new_run_id(run_name)
        self._run_name = run_name
        self._broker = Broker(self.session_id, project, main_run=self.main_run, read_only=read_only)
        self.inbox: FlaggedQueue[PendingCommand] = self._broker.inbox
        """Control commands (pause, resume, stop, test) for the training thread to answer."""
        self._transport = Transport(
            self._broker,
            token=self.token,
            dashboard_dir=_DASHBOARD_DIR if dashboard_dir is None else dashboard_dir,
            on_connect=self._announce_client,
            home=home,
            limits=limits,
        )
        self._buffer: deque[RawEvent] = deque()
        self._overflow = 0
        self._overflow_reported = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pump: threading.Thread | None = None
        self._session_file: Path | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        self._started_at = time.time()
        self._announced: set[str] = set()  # the kinds of dashboard already announced
        # The main run exists before any client can ask about it.
        self._broker.publish([self._run_started(self.main_run, run_name, None)])

    # ----------------------------------------------------------------------------- addresses

    @property
    def url(self) -> str:
        """The dashboard's address, token included: ``http://127.0.0.1:PORT/?token=...``."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    @property
    def ws_url(self) -> str:
        """The websocket address, token included."""
        return f"ws://{HOST}:{self.port}/?token={self.token}"

    # ----------------------------------------------------------------------------- lifecycle

    def start(self) -> SessionServer:
        """Listen (moving to the next free port if needed), start the threads, write the
        discovery file and print the dashboard's address.

        Returns:
            ``self``, so that ``server = SessionServer(...).start()`` reads well.

        Raises:
            ConfigurationError: no free port in range, or the home folder is not writable.
        """
        if self._pump is not None or self._closed:
            raise ConfigurationError("start() was already called; expected a new SessionServer")
        sock = bind(HOST, self._requested_port)
        self._transport.start(sock)
        self.port = self._transport.port
        self._pump = threading.Thread(target=self._run_pump, name="onthefly-pump", daemon=True)
        self._pump.start()
        atexit.register(self.close)
        try:
            self._session_file = write_session(self._discovery_record(), self._home)
        except ConfigurationError:
            self.close()
            raise
        if not self._quiet:
            announce(f"[onthefly] dashboard: {self.url}")
        return self

    def close(self) -> None:
        """Stop serving; safe to call twice, and called at interpreter exit.

        Queued events are flushed to the clients, pending control commands are answered
        with ``session_closed``, connections are closed, threads joined and the discovery
        file removed.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        if self._pump is not None:
            self._stop.set()
            self._wake.set()
            self._pump.join()
            self._drain()  # what the training thread published last
        self._broker.close()
        self._transport.close()
        if self._session_file is not None:
            remove_session(self._session_file)

    def __enter__(self) -> SessionServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- training side

    def publish(self, run: str, event: EventBody) -> None:
        """Queue one stream event; cheap and never blocking (call it from the training thread).

        The event was validated when it was built; the pump thread adds the envelope
        (``session``, ``run``, ``seq``, ``time``) and numbers it.

        Args:
            run: the run id (``main_run`` or one from :meth:`add_run`).
            event: the event's body, e.g. :class:`~onthefly.protocol.MetricsBody`; any but
                ``run_started`` (:meth:`add_run` announces runs).

        Raises:
            ConfigurationError: ``event`` is a ``run_started`` body.

        Example:
            >>> server.publish(  # doctest: +SKIP
            ...     server.main_run, StatusBody(state="paused", step=10, epoch=0)
            ... )
        """
        if isinstance(event, RunStartedBody):
            raise ConfigurationError(
                "cannot publish 'run_started' events; expected add_run() to announce a run"
            )
        self._queue(run, event.type, (event,))

    def publish_all(self, run: str, events: Sequence[EventBody]) -> None:
        """Queue several events of one kind, in order, as :meth:`publish` would one by one.

        One check of the buffer and one clock reading for all of them: the training
        thread ships its steps' values a batch at a time (the events' ``time`` is when
        the batch was queued).

        Raises:
            ConfigurationError: the events are of more than one kind, or ``run_started``.
        """
        if not events:
            return
        kinds = {event.type for event in events}
        if len(kinds) != 1 or "run_started" in kinds:
            raise ConfigurationError(
                f"publish_all() got events of kinds {sorted(kinds)}; expected events of one "
                "kind other than 'run_started' (add_run() announces runs)"
            )
        (kind,) = kinds
        self._queue(run, kind, events)

    def publish_fields(self, run: str, kind: str, fields: Sequence[dict[str, Any]]) -> None:
        """Queue several events of one kind given as their fields, in order: the pump
        validates each as it numbers it (an invalid one is dropped and reported).

        Raises:
            ConfigurationError: ``kind`` is ``run_started``.
        """
        if kind == "run_started":
            raise ConfigurationError(
                "cannot publish 'run_started' events; expected add_run() to announce a run"
            )
        self._queue(run, kind, fields)

    def _queue(
        self, run: str, kind: str, events: Sequence[EventBody] | Sequence[dict[str, Any]]
    ) -> None:
        if self._closed:
            return  # teardown hooks may still publish after close(): nothing to do
        room = max(BUFFER_SIZE - len(self._buffer), 0)
        if room < len(events):
            self._overflow += len(events) - room  # reported by the pump; never block
            events = events[:room]
        now = time.time()
        self._buffer.extend([(run, kind, now, event) for event in events])
        if kind not in STREAMS:
            self._wake.set()

    def add_run(self, name: str, *, parent: str | None = None) -> str:
        """Create a run (e.g. a fork of ``parent``), announce it, and return its id.

        Example:
            >>> fork = server.add_run("lr-0.01", parent=server.main_run)  # doctest: +SKIP
        """
        run = self._new_run_id(name)
        if len(self._buffer) < BUFFER_SIZE:
            self._buffer.append(self._run_started(run, name, parent))
        else:
            self._overflow += 1
        return run

    def history_snapshot(
        self, timeout: float = 5.0, max_total_points: int | None = None
    ) -> Snapshot:
        """Every run's full history and the log tail, once what was published so far has
        reached the broker (for an export).

        Args:
            timeout: the most seconds to wait for the pump to catch up.
            max_total_points: the most points of all series together (longer series are
                min/max-decimated); ``None``: every point.
        """
        deadline = time.monotonic() + timeout
        while self._buffer and self._pump is not None and time.monotonic() < deadline:
            self._wake.set()
            time.sleep(PUMP_INTERVAL / 3)
        return self._broker.history(max_total_points)

    def preload(self, saved: Snapshot) -> None:
        """Put saved runs (from :meth:`history_snapshot`) back into this session's history."""
        self._broker.preload(saved)

    def has_clients(self) -> bool:
        """Whether at least one dashboard or client watches (a relay such as the hub does not
        count: it would keep every run open at its end)."""
        return self._broker.watchers > 0

    # ----------------------------------------------------------------------------- internals

    def _run_pump(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(PUMP_INTERVAL)
            self._wake.clear()
            self._drain()

    def _drain(self) -> None:
        buffer = self._buffer
        self._report_overflow()
        while buffer:
            chunk = [buffer.popleft() for _ in range(min(len(buffer), _CHUNK))]
            self._broker.publish(chunk)

    def _report_overflow(self) -> None:
        lost = self._overflow - self._overflow_reported
        if lost <= 0:
            return
        self._overflow_reported += lost
        message = (
            f"the training process published faster than the server could take; "
            f"{lost} events were dropped (buffer of {BUFFER_SIZE})"
        )
        now = time.time()
        record = LogRecord(time=now, level="WARNING", logger="onthefly.server", message=message)
        self._broker.publish([(self.main_run, "log", now, LogBody(record=record))])

    def _run_started(self, run: str, name: str, parent: str | None) -> RawEvent:
        now = time.time()
        info = RunInfo(
            run=run,
            project=self.project,
            name=name,
            parent=parent,
            state="running",
            step=0,
            epoch=0,
            started_at=now,
        )
        return (run, "run_started", now, RunStartedBody(info=info))

    def _new_run_id(self, name: str) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:64] or "run"
        with self._runs_lock:
            run, n = base, 1
            while run in self._run_ids:
                n += 1
                run = f"{base}-{n}"
            self._run_ids.add(run)
        return run

    def _discovery_record(self) -> SessionFile:
        return SessionFile(
            pid=os.getpid(),
            port=self.port,
            token=self.token,
            project=self.project,
            run=self._run_name,
            started_at=self._started_at,
            session=self.session_id,
            url=self.url,
            viewing=self._viewing,
        )

    def _announce_client(self, headers: Mapping[str, str]) -> None:
        kind = dashboard_kind(headers)
        if kind is None or self._quiet or kind in self._announced:
            return
        self._announced.add(kind)
        announce(f"[onthefly] dashboard connected ({kind}) on ws://{HOST}:{self.port}")
