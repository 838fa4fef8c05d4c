"""The websocket transport: a ``websockets.sync`` server on daemon threads.

Threads rather than asyncio because the training loop owns the main thread. Connections
come in through the :class:`~onthefly.server.front_door.FrontDoor`, which gives one a
thread only once its request head is in and the connection limits allow it
(:mod:`onthefly.server.admission`). Each websocket then gets its handler thread (reading
frames into the broker) and a sender thread (writing its outbox), so one stuck client never
slows another, the broker, or training.
A client that accepts no data for ``stall_timeout`` seconds is disconnected: the socket's
timeout makes the blocked write fail.

Frames between ``MAX_FRAME_BYTES`` and four times that are read and answered with
``frame_too_large``; beyond that the websockets library closes the connection with code
1009 (message too big) before the frame is read.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve

from onthefly.errors import ConfigurationError
from onthefly.protocol import MAX_FRAME_BYTES
from onthefly.server.admission import Kind, Limits
from onthefly.server.broker import Broker, Client
from onthefly.server.discovery import SessionFile, list_sessions
from onthefly.server.front_door import FrontDoor
from onthefly.server.gate import (
    is_authenticated,
    is_sessions_request,
    is_upgrade,
    refuse,
    sessions_response,
    static_response,
)

_LIBRARY_LOG = logging.getLogger("onthefly.server.websockets")
# The library reports every start, stop and handshake at INFO; in a training script whose
# logging is at INFO that is console noise, and the dashboard's log panel is for the run.
_LIBRARY_LOG.setLevel(logging.WARNING)

PORT_ATTEMPTS = 20
"""Ports tried, upwards from the requested one, before giving up."""

STALL_TIMEOUT = 30.0
"""Seconds a client may leave a frame unaccepted before it is disconnected."""

SEND_BUFFER = 128 << 10
"""Bytes of a connection's kernel send buffer (a few batches of events)."""


def bind(host: str, port: int, attempts: int = PORT_ATTEMPTS) -> socket.socket:
    """A listening socket on ``port``, or on the next free one (``0``: any free port).

    Raises:
        ConfigurationError: every port of the range is taken.
    """
    candidates = [0] if port == 0 else range(port, min(port + attempts, 65536))
    for candidate in candidates:
        try:
            return socket.create_server((host, candidate))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigurationError(f"cannot listen on {host}:{candidate} ({exc})") from exc
    last = candidates[-1]
    raise ConfigurationError(
        f"ports {port}-{last} on {host} are all in use; expected a free port "
        "(choose one with ONTHEFLY_PORT or port=, or port=0 for any)"
    )


class Transport:
    """Serves a broker's clients over websockets, plus the dashboard's static files.

    Args:
        broker: the protocol logic (``None`` where a subclass picks one per connection, see
            :meth:`_broker_for`).
        token: the secret every websocket must present.
        dashboard_dir: the built dashboard bundle (``None``: a page says it is not built).
        on_connect: called with the upgrade request's headers after each new websocket.
        stall_timeout: seconds before a client that accepts no data is disconnected.
        home: the OnTheFly home whose discovery folder lists the sibling sessions (their
            pages may connect here; ``GET /sessions`` lists them); default
            ``$ONTHEFLY_HOME`` or ``~/.onthefly``.
        limits: the connection limits (see :mod:`onthefly.server.admission`).
    """

    def __init__(
        self,
        broker: Broker | None,
        *,
        token: str,
        dashboard_dir: Path | None,
        on_connect: Callable[[Mapping[str, str]], None] | None = None,
        stall_timeout: float = STALL_TIMEOUT,
        home: str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
    ) -> None:
        self._broker = broker
        self.limits = limits or Limits()
        self._home = home
        self._token = token
        self._dashboard_dir = dashboard_dir
        self._on_connect = on_connect
        self._stall_timeout = stall_timeout
        self._connections: dict[Client, ServerConnection] = {}
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._door: FrontDoor | None = None
        self.port = 0

    def start(self, sock: socket.socket) -> None:
        """Serve on a bound socket (see :func:`bind`) from daemon threads."""
        self.port = sock.getsockname()[1]
        self._server = serve(
            self._handle,
            sock=sock,
            process_request=self._process_request,
            compression=None,  # loopback: deflate would only cost CPU
            # No keepalive pings: on loopback a dead client's socket closes by itself and a
            # stuck one meets the stall timeout, while a ping queued behind a slow reader's
            # backlog would time out and drop a client that is only slow (and log an error).
            ping_interval=None,
            max_size=4 * MAX_FRAME_BYTES,  # room to read an oversized frame and answer it
            server_header=None,
            open_timeout=self.limits.handshake_timeout,
            logger=_LIBRARY_LOG,
        )
        # Connection threads are daemons, so a forgotten close() never keeps the training
        # process alive.
        self._door = FrontDoor(sock, self._server, self._classify, self.limits)
        self._door.start()

    @property
    def door(self) -> FrontDoor | None:
        """The front door while serving (its admission counts what is being served)."""
        return self._door

    def close(self, flush_timeout: float = 2.0) -> None:
        """Send what is queued (up to ``flush_timeout`` s), then close every connection."""
        if self._server is None:
            return
        deadline = time.monotonic() + flush_timeout
        with self._lock:
            connections = dict(self._connections)
        for client, connection in connections.items():
            client.outbox.close()
            if not client.outbox.wait_drained(max(0.0, deadline - time.monotonic())):
                _abort(connection)  # unblocks a sender stuck on a client that reads nothing
        if self._door is not None:
            self._door.stop()  # no new connection; then the library closes the open ones
        self._server.shutdown()
        # The library's accept loop, which never ran, would have closed its wake-up socket.
        with contextlib.suppress(OSError):
            self._server.shutdown_watcher.close()
        self._server = None
        self._door = None

    # ----------------------------------------------------------------------------- handshake

    def _classify(self, request: Request) -> Kind:
        authenticated = is_authenticated(
            request, token=self._token, port=self.port, live_ports=self._live_ports
        )
        return Kind.AUTHENTICATED if authenticated else Kind.OTHER

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        refused = refuse(request, token=self._token, port=self.port, live_ports=self._live_ports)
        if refused is not None or is_upgrade(request):
            return refused
        if is_sessions_request(request):
            return sessions_response(request, token=self._token, sessions=self._live_sessions)
        return static_response(self._dashboard_dir, request)

    def _live_sessions(self) -> list[SessionFile]:
        return list_sessions(self._home)

    def _live_ports(self) -> set[int]:
        return {session.port for session in list_sessions(self._home)}

    def _broker_for(self, connection: ServerConnection) -> Broker | None:
        """The broker serving an accepted websocket (the hub has one per session)."""
        return self._broker

    # ----------------------------------------------------------------------------- connection

    def _handle(self, connection: ServerConnection) -> None:
        # A timeout on the socket bounds how long a blocked write may wait: after it the
        # write fails and the library closes the connection.
        connection.socket.settimeout(self._stall_timeout)
        # A small kernel buffer keeps a slow client's backlog in its outbox, where telemetry
        # is coalesced and the client told; the default grows to megabytes, minutes of
        # events that a slow reader would drain long after the fact, never told it lags.
        connection.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        broker = self._broker_for(connection)
        if broker is None:  # its session went away between the handshake and now
            connection.close(1001, "session gone")
            return
        client = broker.connect()
        with self._lock:
            self._connections[client] = connection
        sender = threading.Thread(
            target=self._send_loop,
            args=(client, connection),
            name=f"onthefly-send-{client.number}",
            daemon=True,
        )
        sender.start()
        if self._on_connect is not None and connection.request is not None:
            self._on_connect(connection.request.headers)
        try:
            for frame in connection:
                broker.receive(client, frame, time.monotonic())
        except ConnectionClosed:
            pass
        finally:
            broker.disconnect(client)
            with self._lock:
                self._connections.pop(client, None)
            sender.join(self._stall_timeout)

    def _send_loop(self, client: Client, connection: ServerConnection) -> None:
        outbox = client.outbox
        try:
            while (frames := outbox.take(timeout=1.0)) is not None:
                try:
                    for frame in frames:
                        connection.send(frame, text=True)
                finally:
                    outbox.sent()
                if outbox.overflowed:
                    connection.close(1008, "client too slow: its queue overflowed")
                    return
        except (ConnectionClosed, OSError):
            return
        connection.close(1001, "session closed")


def _abort(connection: ServerConnection) -> None:
    with contextlib.suppress(OSError):
        connection.socket.shutdown(socket.SHUT_RDWR)
