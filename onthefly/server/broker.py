"""The session's protocol logic, without any I/O.

The broker numbers stream events (validated by the
:class:`~onthefly.server.staging.EventStager`), keeps the run table, the replay ring and the
connected clients, and turns every client frame into exactly one answer. It never touches
a socket: answers and events go into each client's :class:`~onthefly.server.outbox.Outbox`
and the transport's sender threads write them out. Tests drive it directly.

Threads: :meth:`Broker.publish` is called by one thread at a time (the server's pump);
:meth:`Broker.receive` by each connection's handler thread; control commands reach the
training thread through :attr:`Broker.inbox`. One lock guards the state; heavy work
(decimation, serialising snapshots and history) happens outside it, on sender threads.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial

from onthefly.flagged_queue import FlaggedQueue
from onthefly.protocol import (
    CONTROL_COMMANDS,
    EXCLUSIVE_COMMANDS,
    SERVER_MESSAGE,
    Command,
    ErrorCode,
    ErrorInfo,
    ErrorReply,
    Hello,
    History,
    HistoryReply,
    Message,
    PingReply,
    Reply,
    RunInfo,
    SeqReply,
    Series,
    Snapshot,
    StatusReply,
    Subscribe,
    SubscribeReply,
    reply_fields,
)
from onthefly.server.commands import Rejection, TokenBucket, parse_command, read_id
from onthefly.server.history import Window, decimate
from onthefly.server.outbox import Outbox, StreamEvent
from onthefly.server.pending import PendingCommand
from onthefly.server.runs import RunTable, render_snapshot
from onthefly.server.staging import EventStager, RawEvent
from onthefly.version import __version__

logger = logging.getLogger("onthefly.server")

RING_SIZE = 100_000
"""Events kept for replay to clients that reconnect with ``since``."""

_STATUS_FIELDS = set(StatusReply.model_fields) & set(RunInfo.model_fields)
"""What a ``status`` reply tells of the run asked about: the fields it shares with RunInfo."""


@dataclass(eq=False)
class Client:
    """One connection as the broker sees it."""

    number: int
    outbox: Outbox
    bucket: TokenBucket
    subscribed: bool = False
    relay: bool = False


class Broker:
    """Numbering, state and command routing of one session.

    Args:
        session: the session id put in every event.
        project: the project name sent in ``hello``.
        main_run: the run targeted by commands that name none.
        ring_size: events kept for replay.
        outbox_events: a client's queued events above which its telemetry is coalesced.
        rate: command frames per second allowed per client (burst: twice as many).

    Example:
        >>> broker = Broker("s1", "demo", main_run="main")
        >>> client = broker.connect()
        >>> broker.receive(client, '{"type": "ping", "id": "1"}', now=0.0)
    """

    def __init__(
        self,
        session: str,
        project: str,
        *,
        main_run: str,
        ring_size: int = RING_SIZE,
        outbox_events: int = 20_000,
        rate: float = 200.0,
        read_only: str | None = None,
    ) -> None:
        self.session = session
        self.read_only = read_only
        """Why control commands are refused (a viewed session file), or ``None``."""
        self.project = project
        self.main_run = main_run
        self.inbox: FlaggedQueue[PendingCommand] = FlaggedQueue()
        self._ring: deque[StreamEvent] = deque(maxlen=ring_size)
        self._outbox_events = outbox_events
        self._rate = rate
        self._lock = threading.Lock()
        self._publishing = threading.Lock()
        self._seq = 0
        self._runs = RunTable()
        self._clients: set[Client] = set()
        self._pending: set[PendingCommand] = set()
        self._numbers = itertools.count(1)
        self._stager = EventStager(session, main_run)
        self._closed = False

    @property
    def seq(self) -> int:
        """The ``seq`` of the latest stream event (0 before the first)."""
        return self._seq

    @property
    def clients(self) -> int:
        """How many clients are connected."""
        with self._lock:
            return len(self._clients)

    @property
    def watchers(self) -> int:
        """How many connected clients watch the run themselves (relays do not count)."""
        with self._lock:
            return sum(not client.relay for client in self._clients)

    # ----------------------------------------------------------------------------- clients

    def connect(self) -> Client:
        """Register a new connection; its outbox starts with the ``hello`` frame."""
        client = Client(
            number=next(self._numbers),
            outbox=Outbox(max_events=self._outbox_events, max_items=5 * self._outbox_events),
            bucket=TokenBucket(rate=self._rate, burst=2 * self._rate),
        )
        hello = Hello(
            session=self.session,
            server=f"onthefly/{__version__}",
            project=self.project,
            time=time.time(),
        )
        client.outbox.put(SERVER_MESSAGE.dump_json(hello))
        with self._lock:
            self._clients.add(client)
        return client

    def disconnect(self, client: Client) -> None:
        """Forget a connection; its outbox is closed."""
        with self._lock:
            self._clients.discard(client)
        client.outbox.close()

    # ----------------------------------------------------------------------------- stream

    def publish(self, events: Iterable[RawEvent]) -> None:
        """Number, validate, apply and fan out events, in order.

        An event that fails validation gets no ``seq`` (the stream stays gapless); it is
        reported once per distinct problem as a ``WARNING`` log event and on the
        ``onthefly.server`` logger.
        """
        with self._publishing:
            staged = self._stager.stage(events, self._seq)
            if not staged:
                return
            # Applying and fanning out under one lock hold is what makes a subscription's
            # snapshot and its live stream meet without a gap or a duplicate.
            lines = [line for _, line in staged]
            with self._lock:
                for model, line in staged:
                    self._runs.apply(model)
                    self._ring.append(line)
                self._seq = lines[-1].seq
                for client in self._clients:
                    if client.subscribed:
                        client.outbox.put_events(lines)

    # ----------------------------------------------------------------------------- commands

    def receive(self, client: Client, frame: str | bytes, now: float) -> None:
        """Answer one client frame (exactly one ``reply`` or ``error`` goes to its outbox).

        Args:
            client: the connection the frame came from.
            frame: the raw websocket message.
            now: a monotonic clock, for rate limiting.
        """
        if not client.bucket.allow(now):
            self._error(
                client,
                read_id(frame),
                "rate_limited",
                f"too many frames; expected at most {self._rate:g} per second",
            )
            return
        command = parse_command(frame)
        if isinstance(command, Rejection):
            self._error(client, command.id, command.code, command.message)
            return
        run = command.run or self.main_run
        with self._lock:
            known = run in self._runs
        if not known:
            self._error(
                client,
                command.id,
                "unknown_run",
                f"no run {run!r} in this session; expected one of {self._run_ids()}",
            )
            return
        if command.type in CONTROL_COMMANDS and self.read_only is not None:
            self._error(client, command.id, "unsupported", self.read_only)
        elif command.type in CONTROL_COMMANDS:
            self._hand_over(client, command, run)
        elif isinstance(command, Subscribe):
            self._subscribe(client, command)
        elif isinstance(command, History):
            self._history(client, command, run)
        elif command.type == "unsubscribe":
            with self._lock:
                client.subscribed = False
                client.outbox.reset_stream()
            self._reply(client, command.id, SeqReply(seq=self._seq))
        elif command.type == "status":
            self._reply(client, command.id, self._status(run))
        else:  # ping
            self._reply(client, command.id, PingReply(time=time.time(), seq=self._seq))

    def _subscribe(self, client: Client, command: Subscribe) -> None:
        with self._lock:
            client.outbox.reset_stream()
            client.subscribed = True
            client.relay = command.relay
            missed = self._missed_since(command.since)
            if missed is not None:
                self._reply(client, command.id, SubscribeReply(mode="replay", seq=self._seq))
                client.outbox.put_events(missed)
                return
            capture = self._runs.capture(self._seq)
            self._reply(client, command.id, SubscribeReply(mode="snapshot", seq=self._seq))
            client.outbox.put(partial(render_snapshot, capture, self.session, command.max_points))

    def _missed_since(self, since: int | None) -> list[StreamEvent] | None:
        """The events after ``since`` if the ring still holds them all (and not too many)."""
        if since is None or since > self._seq or self._seq - since > self._outbox_events:
            return None
        if since == self._seq:
            return []
        if not self._ring or self._ring[0].seq > since + 1:
            return None
        return list(itertools.islice(self._ring, since + 1 - self._ring[0].seq, None))

    def _history(self, client: Client, command: History, run: str) -> None:
        with self._lock:
            window = self._runs.window(
                run, command.split, command.metric, command.start, command.end
            )
        client.outbox.put(partial(_render_history, command, run, window))

    def _status(self, run: str) -> StatusReply:
        with self._lock:
            infos = self._runs.infos()
            seq = self._seq
        target = next(info for info in infos if info.run == run)
        return StatusReply(runs=infos, seq=seq, **target.model_dump(include=_STATUS_FIELDS))

    def _hand_over(self, client: Client, command: Command, run: str) -> None:
        with self._lock:
            busy = command.type in EXCLUSIVE_COMMANDS and any(
                p.command.type == command.type and p.run == run and not p.answered
                for p in self._pending
            )
            closed = self._closed
            if not (closed or busy):
                pending = PendingCommand(command, run, client.outbox.put, self._answered)
                self._pending.add(pending)
        if busy:
            # The training thread is busy with the first one and cannot say so itself.
            self._error(
                client,
                command.id,
                "busy",
                f"a {command.type!r} command is already waiting or running for run {run!r}; "
                "expected its answer before sending another",
            )
            return
        if closed:
            self._error(
                client,
                command.id,
                "session_closed",
                "the session is closing; expected a live session",
            )
            return
        self.inbox.put(pending)

    def _answered(self, pending: PendingCommand) -> None:
        with self._lock:
            self._pending.discard(pending)

    def run_infos(self) -> list[RunInfo]:
        """Every run as it stands now (copies)."""
        with self._lock:
            return self._runs.infos()

    def _run_ids(self) -> str:
        with self._lock:
            return ", ".join(repr(info.run) for info in self._runs.infos())

    def _reply(self, client: Client, command_id: str, data: Message) -> None:
        reply = Reply(id=command_id, data=reply_fields(data))
        client.outbox.put(SERVER_MESSAGE.dump_json(reply))

    def _error(self, client: Client, command_id: str | None, code: ErrorCode, message: str) -> None:
        error = ErrorReply(id=command_id, error=ErrorInfo(code=code, message=message))
        client.outbox.put(SERVER_MESSAGE.dump_json(error))

    # ----------------------------------------------------------------------------- saved history

    def history(self, max_total_points: int | None = None) -> Snapshot:
        """Every run's full history and the log tail, as a snapshot message.

        Args:
            max_total_points: the most points of all series together; beyond it every
                series longer than its share is min/max-decimated to it (``None``: every
                point, undecimated).
        """
        with self._lock:
            capture = self._runs.capture(self._seq)
        windows = [window for _, _, series in capture.runs for window in series.values()]
        total = sum(len(window.steps) for window in windows)
        cap = None
        if max_total_points is not None and total > max_total_points:
            cap = max(2, max_total_points // max(1, len(windows)))
        return Snapshot.model_validate_json(render_snapshot(capture, self.session, cap))

    def preload(self, saved: Snapshot) -> None:
        """Put the runs of a saved snapshot back before (or while) clients watch."""
        with self._publishing, self._lock:
            self._runs.restore(saved.runs, saved.logs)
            self._stager.known_runs.update(run.run for run in saved.runs)

    # ----------------------------------------------------------------------------- shutdown

    def close(self) -> None:
        """Answer every pending control command with ``session_closed``; refuse new ones."""
        with self._lock:
            self._closed = True
            pending = list(self._pending)
        for command in pending:
            command.fail("session_closed", "the session closed before the command took effect")


def _render_history(command: History, run: str, window: Window) -> bytes:
    series: Series = decimate(window, command.max_points)
    data = HistoryReply(run=run, split=command.split, metric=command.metric, series=series)
    return SERVER_MESSAGE.dump_json(Reply(id=command.id, data=reply_fields(data)))
