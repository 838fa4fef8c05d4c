"""The connection under a :class:`~onthefly.client.Client`: one websocket, one request path.

A daemon reader thread routes each ``reply``/``error`` to the command that waits for it
(matched by ``id``) and queues stream messages for :meth:`Connection.watch`, so commands may
be sent from another thread while one thread watches. Uses only ``websockets.sync``
(threads, no asyncio) and never imports torch.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from onthefly.client.resolve import describe
from onthefly.errors import (
    AuthenticationError,
    CommandError,
    ConfigurationError,
    OnTheFlyError,
    SessionGone,
    SessionNotFound,
)
from onthefly.protocol import (
    CLIENT_COMMAND,
    CONTROL_COMMANDS,
    SERVER_MESSAGE,
    Batch,
    Coalesced,
    Command,
    ErrorReply,
    Event,
    Hello,
    MetricsEvent,
    Reply,
    Snapshot,
    StatusChanged,
    StepsEvent,
)
from onthefly.server.discovery import SessionFile

StreamMessage = Snapshot | Event | Coalesced
"""What :meth:`Connection.watch` yields: the snapshot, then events and ``coalesced`` notices."""

MAX_FRAME = 256 << 20
"""Largest frame accepted from the server: snapshots of long runs are large."""

_LIBRARY_LOG = logging.getLogger("onthefly.client.websockets")
# At DEBUG the library logs every handshake header, the token's Authorization included.
_LIBRARY_LOG.setLevel(logging.WARNING)

_CLOSED = object()
"""Put on the stream queue when the connection ends."""


class _Pending:
    """One command waiting for its answer (set once by the reader thread)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.answer: Reply | ErrorReply | OnTheFlyError | None = None

    def settle(self, answer: Reply | ErrorReply | OnTheFlyError) -> None:
        self.answer = answer
        self.done.set()


class Connection:
    """The websocket of one client and its reader thread: the one path every command takes.

    :meth:`request` sends a command and waits for its single answer; :meth:`watch` yields
    the stream. Thread-safe: commands may be sent from one thread while another watches.

    Args:
        session: the discovery record of the session to connect to.
        timeout: seconds to wait for the connection and for each non-control reply.

    Raises:
        SessionNotFound: the session did not accept a connection or greet with ``hello``.
        AuthenticationError: the session refused the token from its discovery file.
    """

    def __init__(self, session: SessionFile, timeout: float) -> None:
        self.session = session
        self._timeout = timeout
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}
        self._gone: SessionGone | None = None
        self._stream: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._watching = False
        # Held open as a context manager: the way websockets keeps a long-lived connection.
        self._exit = contextlib.ExitStack()
        self._ws = self._exit.enter_context(_open(session, timeout))
        try:
            self.hello: Hello = _read_hello(self._ws, session, timeout)
        except BaseException:
            self._exit.close()
            raise
        self._reader = threading.Thread(target=self._read_loop, name="onthefly-client", daemon=True)
        self._reader.start()

    def request(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send the command ``kind`` with ``fields`` (``None`` ones left out) and return its
        reply's data.

        Raises:
            ConfigurationError: the fields do not make a valid command (nothing was sent).
            CommandError: the session answered with an error.
            SessionGone: the session ended before answering.
            TimeoutError: a non-control command got no answer within the timeout.
        """
        command = _build(kind, str(next(self._ids)), fields)
        pending = _Pending()
        with self._lock:
            if self._gone is not None:
                raise self._gone
            self._pending[command.id] = pending
        # On a closed connection the reader thread settles ``pending`` with SessionGone.
        with contextlib.suppress(ConnectionClosed):
            self._ws.send(CLIENT_COMMAND.dump_json(command).decode())
        wait = None if kind in CONTROL_COMMANDS else self._timeout
        if not pending.done.wait(wait):
            with self._lock:
                self._pending.pop(command.id, None)
            raise TimeoutError(f"{describe(self.session)} did not answer {kind!r} within {wait} s")
        return _outcome(kind, pending.answer)

    def watch(self) -> Iterator[StreamMessage]:
        """Subscribe and yield the stream as protocol models, in ``seq`` order.

        Yields a :class:`~onthefly.protocol.Snapshot` first, then every stream event
        (``batch`` frames are unpacked; a ``steps`` event, a batch of training steps, comes
        out as one ``metrics`` event per step, see :func:`as_metrics`) and any
        :class:`~onthefly.protocol.Coalesced` notice
        (this client fell behind and some telemetry was skipped). Ends after the main run's
        ``finished`` status (at once if the snapshot shows it finished) or when the
        connection closes. Leaving the loop early unsubscribes.

        Raises:
            ConfigurationError: this connection is already watching.
        """
        if self._watching:
            raise ConfigurationError("this client is already watching; open a second client")
        self._watching = True
        try:
            self.request("subscribe")
            yield from self._stream_until_finished()
        finally:
            self._watching = False
            self._unsubscribe()

    def close(self) -> None:
        """Close the connection (idempotent); pending commands raise :class:`SessionGone`."""
        self._exit.close()
        self._reader.join(timeout=self._timeout)

    def _unsubscribe(self) -> None:
        """Best effort: the stream stops, and what is still queued is discarded."""
        if self._gone is None:
            with contextlib.suppress(OnTheFlyError, TimeoutError):
                self.request("unsubscribe")
        while not self._stream.empty():
            self._stream.get_nowait()

    def _stream_until_finished(self) -> Iterator[StreamMessage]:
        main_run: str | None = None
        while (message := self._stream.get()) is not _CLOSED:
            if isinstance(message, Snapshot):
                main_run = _main_run(message, self.session)
                yield message
                if any(r.run == main_run and r.state == "finished" for r in message.runs):
                    return
                continue
            if isinstance(message, StepsEvent):  # a batch of steps: one metrics event each
                yield from as_metrics(message)
                continue
            yield message
            finished = isinstance(message, StatusChanged) and message.state == "finished"
            if finished and message.run == main_run:
                return

    def _read_loop(self) -> None:
        reason = "the connection closed"
        try:
            for frame in self._ws:
                self._dispatch(SERVER_MESSAGE.validate_json(frame))
        except ConnectionClosed as exc:
            reason = f"the connection closed ({exc})"
        except ValidationError as exc:
            reason = f"it sent a frame this client cannot read ({exc.error_count()} errors)"
            self._ws.close()
        except Exception as exc:  # never leave a waiting command hanging on a reader crash
            reason = f"the client could not read from it ({exc!r})"
            self._ws.close()
        self._end(SessionGone(f"{describe(self.session)} ended: {reason}"))

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, (Reply, ErrorReply)):
            with self._lock:
                pending = self._pending.pop(message.id or "", None)
            if pending is not None:
                pending.settle(message)
        elif self._watching:
            for item in message.events if isinstance(message, Batch) else [message]:
                self._stream.put(item)

    def _end(self, gone: SessionGone) -> None:
        with self._lock:
            self._gone = gone
            pending, self._pending = list(self._pending.values()), {}
        for waiter in pending:
            waiter.settle(gone)
        self._stream.put(_CLOSED)


def _open(session: SessionFile, timeout: float) -> ClientConnection:
    try:
        return ws_connect(
            f"ws://127.0.0.1:{session.port}/",
            additional_headers={"Authorization": f"Bearer {session.token}"},
            open_timeout=timeout,
            close_timeout=min(timeout, 2.0),
            max_size=MAX_FRAME,
            proxy=None,  # the session is on loopback; an HTTP proxy from the environment is wrong
            logger=_LIBRARY_LOG,
        )
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status in (401, 403):
            raise AuthenticationError(
                f"{describe(session)} refused the token from its discovery file (HTTP {status}); "
                "expected the token the session wrote there: the file may be stale or altered"
            ) from None
        raise SessionNotFound(
            f"{describe(session)} answered HTTP {status}; expected a websocket upgrade"
        ) from None
    except (OSError, TimeoutError, WebSocketException) as exc:
        raise SessionNotFound(
            f"{describe(session)} did not accept a connection ({exc}); it may have just ended"
        ) from None


def _read_hello(ws: ClientConnection, session: SessionFile, timeout: float) -> Hello:
    try:
        message = SERVER_MESSAGE.validate_json(ws.recv(timeout=timeout))
    except (ConnectionClosed, TimeoutError, ValidationError) as exc:
        raise SessionNotFound(
            f"{describe(session)} did not greet with a valid 'hello' ({type(exc).__name__}); "
            "expected an OnTheFly session of protocol version 1"
        ) from None
    if not isinstance(message, Hello):
        raise SessionNotFound(f"{describe(session)} sent {message.type!r} before 'hello'")
    return message


def _build(kind: str, command_id: str, fields: dict[str, Any]) -> Command:
    given = {key: value for key, value in fields.items() if value is not None}
    try:
        return CLIENT_COMMAND.validate_python({"type": kind, "id": command_id, **given})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'][1:]))}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(f"invalid {kind!r} arguments: {problems}") from None


def _outcome(kind: str, answer: Reply | ErrorReply | OnTheFlyError | None) -> dict[str, Any]:
    if isinstance(answer, Reply):
        return answer.data
    if isinstance(answer, ErrorReply):
        if answer.error.code == "session_closed":
            raise SessionGone(f"{kind!r} did not take effect: {answer.error.message}")
        raise CommandError(answer.error.code, answer.error.message)
    assert isinstance(answer, OnTheFlyError)  # settled by _end
    raise answer


def _main_run(snapshot: Snapshot, session: SessionFile) -> str | None:
    """The id of the session's main run: the root run named in the discovery file."""
    for info in snapshot.runs:
        if info.parent is None and info.name == session.run:
            return info.run
    return snapshot.runs[0].run if snapshot.runs else None


def as_metrics(event: StepsEvent) -> list[MetricsEvent]:
    """A ``steps`` event as the ``metrics`` events it stands for, one per step (each with
    the values that step has), sharing its envelope (``seq``, ``time``)."""
    values: list[dict[str, float | None]] = [{} for _ in event.steps]
    at = {step: index for index, step in enumerate(event.steps)}
    for name, points in event.values.items():
        for step, value in zip(points.steps, points.values, strict=True):
            values[at[step]][name] = value
    envelope: dict[str, Any] = {
        "session": event.session,
        "run": event.run,
        "seq": event.seq,
        "time": event.time,
    }
    return [
        MetricsEvent.model_construct(
            **envelope, type="metrics", v=event.v, split=event.split, step=step, epoch=epoch,
            values=step_values,
        )
        for step, epoch, step_values in zip(event.steps, event.epochs, values, strict=True)
    ]  # fmt: skip
