"""A Python client of a live session: :func:`connect` returns a :class:`Client`.

One websocket connection per client. A daemon reader thread routes each ``reply``/``error``
to the command that waits for it (matched by ``id``) and queues stream messages for
:meth:`Client.watch`, so commands may be sent from another thread while one thread watches.
Uses only ``websockets.sync`` (threads, no asyncio) and never imports torch.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from pydantic import ValidationError
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from onthefly._client_forks import ForkCommands
from onthefly._client_samples import SampleCommands
from onthefly._resolve import describe, find_session
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
    Reply,
    Snapshot,
    StatusChanged,
)
from onthefly.server.discovery import SessionFile

__all__ = ["Client", "StreamMessage", "connect"]

StreamMessage = Snapshot | Event | Coalesced
"""What :meth:`Client.watch` yields: the snapshot, then events and ``coalesced`` notices."""

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


class Client(SampleCommands, ForkCommands):
    """A connection to one live session; create it with :func:`connect`.

    Every command method returns the reply's ``data`` dict. Control commands (``pause``,
    ``resume``, ``stop``, ``test``, ``health``, ``set``, …) take effect on the training thread
    at the next batch boundary, so they wait for as long as that takes; other commands wait at most
    ``timeout`` seconds.

    Raises (from every command method):
        CommandError: the session answered with an error; ``.code`` is the protocol's code.
        SessionGone: the session ended before answering — the connection dropped, or the
            session answered ``session_closed`` (the run ended before the command took effect).
        TimeoutError: a non-control command got no answer within ``timeout``.
        ConfigurationError: an argument is out of range (nothing was sent).

    Example:
        >>> with onthefly.connect("mnist/baseline") as run:  # doctest: +SKIP
        ...     run.pause()["step"]
        118
    """

    def __init__(self, session: SessionFile, *, timeout: float = 10.0) -> None:
        self.session = session
        """The discovery record of the connected session."""
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

    # ------------------------------------------------------------------ commands

    def status(self) -> dict[str, Any]:
        """The main run's state (``running``/``paused``/``testing``/``finished``), step, epoch
        and latest metrics."""
        return self._call("status")

    def ping(self) -> dict[str, Any]:
        """A round trip through the session server (the training thread is not involved)."""
        return self._call("ping")

    def pause(self) -> dict[str, Any]:
        """Pause at the next batch boundary; the reply says at which ``step`` it took effect."""
        return self._call("pause")

    def resume(self, epochs: int | None = None, steps: int | None = None) -> dict[str, Any]:
        """Resume a paused run.

        Args:
            epochs: train this many more epochs (extends a run that reached its stop condition).
            steps: train this many more optimizer steps.
        """
        return self._call("resume", epochs=epochs, steps=steps)

    def stop(self) -> dict[str, Any]:
        """Stop the run at the next batch boundary, as ``trainer.should_stop`` would."""
        return self._call("stop")

    def test(self, label: str | None = None) -> dict[str, Any]:
        """Evaluate the test loader at the next boundary (labelled ``test_N`` unless ``label``)."""
        return self._call("test", label=label)

    def health(self, check: str) -> dict[str, Any]:
        """Run one health check at the next boundary.

        Args:
            check: ``determinism``, ``gradients``, ``instability``, ``activations``,
                ``throughput`` or ``distribution`` (a distributed run's ranks compared).

        Returns:
            ``{check, step, findings: [{check, severity, summary, details}], duration}``.
        """
        return self._call("health", check=check)

    def set_hparams(
        self,
        lr: float | None = None,
        weight_decay: float | None = None,
        momentum: float | None = None,
        betas: tuple[float, float] | None = None,
        group: int | None = None,
        optimizer: int = 0,
        eps: float | None = None,
    ) -> dict[str, Any]:
        """Change optimizer hyperparameters at the next boundary (the ``set`` command).

        Each value is checked against the parameters' dtype and tried on a copy of the
        optimizer's step before anything changes.

        Args:
            lr: new learning rate (> 0); a scheduler keeps it.
            weight_decay: new weight decay (>= 0).
            momentum: new momentum, in [0, 1).
            betas: new Adam-style betas, each in [0, 1).
            group: the param group to change; ``None`` changes every group.
            optimizer: which optimizer of the run.
            eps: new epsilon of Adam-style optimizers (>= 0).

        Returns:
            ``{step, changes: [{step, optimizer, group, name, old, new}]}``.

        Raises:
            CommandError: ``unsupported`` for a value the run cannot take (nothing changed).

        Example:
            >>> run.set_hparams(lr=1e-4, group=0)["changes"][0]["old"]  # doctest: +SKIP
            0.001
        """
        return self._call(
            "set",
            lr=lr,
            weight_decay=weight_decay,
            momentum=momentum,
            betas=betas,
            eps=eps,
            group=group,
            optimizer=optimizer,
        )

    def export(self, path: str | os.PathLike[str], overwrite: bool = False) -> dict[str, Any]:
        """Write the whole session to a ``.otf`` file at the next boundary.

        Args:
            path: the file, resolved against this process's directory (``.otf`` is appended
                when missing); its directory must exist.
            overwrite: replace a file already there (else the export is refused).

        Returns:
            ``{"path", "size", "step", "epoch"}`` of the written file.

        Raises:
            CommandError: ``file_error`` when the file exists (without ``overwrite``) or
                cannot be written.
        """
        return self._call("export", path=os.path.abspath(os.fspath(path)), overwrite=overwrite)

    def load_session(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Load a session file's model, optimizer, scheduler and scaler state into the paused
        run (the ``import`` command; the run's step, data position and RNG go on as they are).
        """
        return self._call("import", path=os.path.abspath(os.fspath(path)))

    def checkpoints(self) -> dict[str, Any]:
        """The checkpoint ring: ``{"checkpoints": [{id, step, epoch, reason, time, size}],
        "capacity", "max_bytes"}``."""
        return self._call("checkpoints")

    def snapshot(self) -> dict[str, Any]:
        """Add a snapshot of the run to its checkpoint ring now; returns the new entry."""
        return self._call("snapshot")

    def restore(self, checkpoint: str) -> dict[str, Any]:
        """Load checkpoint ``checkpoint``'s model, optimizer, scheduler and scaler state into
        the paused run (ids from :meth:`checkpoints`)."""
        return self._call("restore", checkpoint=checkpoint)

    def history(
        self,
        metric: str,
        split: str = "train",
        start: int | None = None,
        end: int | None = None,
        max_points: int = 4000,
    ) -> dict[str, Any]:
        """A metric's series between steps ``start`` and ``end`` (inclusive), min/max-decimated
        to at most ``max_points`` points."""
        return self._call(
            "history", metric=metric, split=split, start=start, end=end, max_points=max_points
        )

    def watch(self) -> Iterator[StreamMessage]:
        """Subscribe and yield the stream as protocol models, in ``seq`` order.

        Yields a :class:`~onthefly.protocol.Snapshot` first, then every stream event
        (``batch`` frames are unpacked) and any :class:`~onthefly.protocol.Coalesced` notice
        (this client fell behind and some telemetry was skipped). Ends after the main run's
        ``finished`` status (at once if the snapshot shows it finished) or when the
        connection closes. Leaving the loop early unsubscribes.

        Raises:
            ConfigurationError: this client is already watching.

        Example:
            >>> for message in client.watch():  # doctest: +SKIP
            ...     if message.type == "metrics":
            ...         print(message.step, message.values)
        """
        if self._watching:
            raise ConfigurationError("this client is already watching; open a second client")
        self._watching = True
        try:
            self._call("subscribe")
            yield from self._stream_until_finished()
        finally:
            self._watching = False
            self._unsubscribe()

    def close(self) -> None:
        """Close the connection (idempotent); pending commands raise :class:`SessionGone`."""
        self._exit.close()
        self._reader.join(timeout=self._timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _call(self, kind: str, **fields: Any) -> dict[str, Any]:
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

    def _unsubscribe(self) -> None:
        """Best effort: the stream stops, and what is still queued is discarded."""
        if self._gone is None:
            with contextlib.suppress(OnTheFlyError, TimeoutError):
                self._call("unsubscribe")
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


def connect(
    run: str | None = None,
    *,
    home: str | os.PathLike[str] | None = None,
    timeout: float = 10.0,
) -> Client:
    """Connect to a live training session.

    Args:
        run: a run name, ``project/run`` or the session's port; may be omitted when exactly
            one session is live.
        home: the OnTheFly home whose discovery files to read (default ``$ONTHEFLY_HOME``,
            else ``~/.onthefly``).
        timeout: seconds to wait for the connection and for each non-control reply.

    Raises:
        SessionNotFound: no live session matches ``run`` (or it did not accept a connection).
        AmbiguousSession: several live sessions match ``run``.
        AuthenticationError: the session refused the token from its discovery file.

    Example:
        >>> import onthefly
        >>> with onthefly.connect("mnist/baseline") as run:  # doctest: +SKIP
        ...     print(run.status()["state"])
        running
    """
    return Client(find_session(run, home), timeout=timeout)


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
