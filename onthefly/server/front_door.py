"""The session server's front door: one thread accepts connections and reads their heads.

A connection gets a thread only once its request head has arrived and
:class:`~onthefly.server.admission.Admission` has let it in; until then it waits here,
costing a socket and no thread, so a flood of idle or slow connections cannot grow the
training process's threads (the rules and the bound are in
:mod:`onthefly.server.admission`). The head is only peeked at (``MSG_PEEK``): the websocket
library reads it again from the socket, as if the connection had just been accepted.
Refusals (400, 429, 431, 503) are written here, without a thread.

Checked against websockets 17.4: its ``Server`` is used without its accept loop
(``serve_forever``). Admitted connections go to ``Server.handler`` on threads registered in
``Server.handler_threads``, as that loop does, and ``Server.socket_closed`` is set once this
door stops accepting, which ``Server.shutdown`` waits for.
"""

from __future__ import annotations

import contextlib
import errno
import http
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.http11 import Request
from websockets.streams import StreamReader
from websockets.sync.server import Server

from onthefly.server.admission import Admission, Kind, Limits, Refusal

log = logging.getLogger(__name__)

RECHECK_S = 0.02
"""How soon a connection that sent part of its head is looked at again (level-triggered
polling would otherwise report its unread bytes in a busy loop)."""

_END_OF_HEAD = b"\r\n\r\n"
_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass
class _Waiting:
    sock: socket.socket
    address: Any
    deadline: float
    recheck: float | None = None
    """When a parked connection (part of its head read) is polled again; ``None``: polled."""


class FrontDoor:
    """Accepts the connections of ``listener`` and hands the admitted ones to ``server``.

    Args:
        listener: the bound, listening socket (also ``server.socket``).
        server: the websocket library's server, whose accept loop is not run.
        classify: tells an authenticated websocket upgrade from any other request.
        limits: the connection limits (default :class:`Limits`).

    Example:
        >>> door = FrontDoor(sock, server, classify, Limits())  # doctest: +SKIP
        >>> door.start(); ...; door.stop(); server.shutdown()  # doctest: +SKIP
    """

    def __init__(
        self,
        listener: socket.socket,
        server: Server,
        classify: Callable[[Request], Kind],
        limits: Limits | None = None,
    ) -> None:
        self._listener = listener
        self._server = server
        self._classify = classify
        self.limits = limits or Limits()
        self.admission = Admission(self.limits)
        self._lock = threading.Lock()
        self._waiting: dict[socket.socket, _Waiting] = {}  # in arrival order
        self._wake_read, self._wake_write = socket.socketpair()
        self._stopping = False
        self._accept_paused_until: float | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start accepting, on a daemon thread."""
        self._listener.setblocking(False)
        self._thread = threading.Thread(target=self._run, name="onthefly-server", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting and close the waiting connections (served ones are left open)."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")
        if self._thread is not None:
            self._thread.join()
        else:  # never started: nothing else would tell the library's shutdown
            self._server.socket_closed.set()
        self._wake_read.close()
        self._wake_write.close()

    def waiting(self) -> int:
        """Connections accepted whose request head has not been handled yet."""
        return len(self._waiting)

    # ----------------------------------------------------------------------------- the loop

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ)
        selector.register(self._wake_read, selectors.EVENT_READ)
        try:
            while not self._stopping:
                for key, _ in selector.select(self._timeout(time.monotonic())):
                    if key.fileobj is self._listener:
                        self._accept(selector)
                    elif key.fileobj is self._wake_read:
                        with contextlib.suppress(OSError):
                            self._wake_read.recv(64)
                    else:
                        self._read(selector, key.data)
                self._tick(selector, time.monotonic())
        except Exception:  # the door must not die silently: nothing could connect any more
            log.exception("the session server stopped accepting connections")
        finally:
            for waiting in list(self._waiting.values()):
                self._drop(selector, waiting)
            selector.close()
            self._server.socket_closed.set()

    def _timeout(self, now: float) -> float | None:
        moments = [w.deadline for w in self._waiting.values()]
        moments += [w.recheck for w in self._waiting.values() if w.recheck is not None]
        if self._accept_paused_until is not None:
            moments.append(self._accept_paused_until)
        return max(0.0, min(moments) - now) if moments else None

    def _accept(self, selector: selectors.BaseSelector) -> None:
        while True:
            try:
                sock, address = self._listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno not in _OUT_OF_FILES:
                    raise
                # Out of file descriptors: make room, or stop polling the listener for a
                # moment (its pending connection would keep it readable, a busy loop).
                if self._waiting:
                    self._drop(selector, next(iter(self._waiting.values())))
                    continue
                selector.unregister(self._listener)
                self._accept_paused_until = time.monotonic() + 0.1
                return
            sock.setblocking(False)
            if len(self._waiting) >= self.limits.max_waiting:
                # The one that waited longest goes: idle sockets cannot lock out a client
                # that sends its request at once.
                self._drop(selector, next(iter(self._waiting.values())))
            waiting = _Waiting(sock, address, time.monotonic() + self.limits.handshake_timeout)
            self._waiting[sock] = waiting
            selector.register(sock, selectors.EVENT_READ, waiting)

    def _read(self, selector: selectors.BaseSelector, waiting: _Waiting) -> None:
        limit = self.limits.max_head_bytes
        try:
            head = waiting.sock.recv(limit, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(selector, waiting)
            return
        if not head:  # closed before asking for anything
            self._drop(selector, waiting)
            return
        end = head.find(_END_OF_HEAD)
        if end >= 0 and end + len(_END_OF_HEAD) < len(head):
            # Bytes after the head: a body, or requests sent without waiting for an answer.
            # Neither has a meaning here, and the library would close without answering.
            self._forget(selector, waiting)
            _refuse(
                waiting.sock,
                len(head),
                Refusal(
                    http.HTTPStatus.BAD_REQUEST,
                    "Bytes after the request head; expected one GET without a body, and "
                    "its answer awaited.\n",
                ),
            )
        elif end >= 0:
            self._decide(selector, waiting, head)
        elif len(head) >= limit:
            self._forget(selector, waiting)
            _refuse(
                waiting.sock,
                len(head),
                Refusal(
                    http.HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"The request head exceeds {limit} bytes; expected a smaller one.\n",
                ),
            )
        else:  # part of the head: look again shortly
            selector.unregister(waiting.sock)
            waiting.recheck = time.monotonic() + RECHECK_S

    def _tick(self, selector: selectors.BaseSelector, now: float) -> None:
        if self._accept_paused_until is not None and now >= self._accept_paused_until:
            self._accept_paused_until = None
            selector.register(self._listener, selectors.EVENT_READ)
        for waiting in list(self._waiting.values()):
            if now >= waiting.deadline:
                self._drop(selector, waiting)  # no request head in time
            elif waiting.recheck is not None and now >= waiting.recheck:
                waiting.recheck = None
                selector.register(waiting.sock, selectors.EVENT_READ, waiting)

    # ----------------------------------------------------------------------------- decisions

    def _decide(self, selector: selectors.BaseSelector, waiting: _Waiting, head: bytes) -> None:
        self._forget(selector, waiting)
        try:
            request = parse_head(head)
        except (EOFError, ValueError, NotImplementedError, WebSocketException) as exc:
            reason = str(exc) or type(exc).__name__
            refusal = Refusal(
                http.HTTPStatus.BAD_REQUEST,
                f"Malformed request ({reason}); expected an HTTP/1.1 GET.\n",
            )
            _refuse(waiting.sock, len(head), refusal)
            return
        try:
            kind = self._classify(request)
        except Exception:  # a check that fails must not admit, nor stop the door
            log.exception("classifying a request failed")
            kind = Kind.OTHER
        source = str(waiting.address[0]) if waiting.address else "?"
        with self._lock:
            refused = self.admission.admit(kind, source, time.monotonic())
        if refused is not None:
            _refuse(waiting.sock, len(head), refused)
            return
        self._hand_over(waiting, kind)

    def _hand_over(self, waiting: _Waiting, kind: Kind) -> None:
        waiting.sock.setblocking(True)
        thread = threading.Thread(
            target=self._serve,
            args=(waiting.sock, waiting.address, kind),
            name=f"onthefly-connection-{kind.value}",
            daemon=True,
        )
        # Registered before it starts, as the library's own accept loop does, so that a
        # shutdown meanwhile waits for it.
        with self._server.lock:
            self._server.handler_threads.add(thread)
        thread.start()

    def _serve(self, sock: socket.socket, address: Any, kind: Kind) -> None:
        try:
            self._server.handler(sock, address)
        finally:
            with self._lock:
                self.admission.release(kind)

    def _forget(self, selector: selectors.BaseSelector, waiting: _Waiting) -> None:
        self._waiting.pop(waiting.sock, None)
        if waiting.recheck is None:
            with contextlib.suppress(KeyError, ValueError):
                selector.unregister(waiting.sock)

    def _drop(self, selector: selectors.BaseSelector, waiting: _Waiting) -> None:
        self._forget(selector, waiting)
        with contextlib.suppress(OSError):
            waiting.sock.close()


def parse_head(head: bytes) -> Request:
    """The request of a complete HTTP request head (ending in an empty line).

    Raises:
        EOFError, ValueError, NotImplementedError, WebSocketException: a malformed head.
    """
    reader = StreamReader()
    reader.feed_data(head)
    reader.feed_eof()
    parser = Request.parse(reader.read_line)
    try:
        next(parser)
    except StopIteration as done:
        request: Request = done.value
        return request
    raise EOFError("incomplete request head")  # pragma: no cover - the head is complete


def _refuse(sock: socket.socket, peeked: int, refusal: Refusal) -> None:
    body = refusal.text.encode()
    response = (
        f"HTTP/1.1 {refusal.status.value} {refusal.status.phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        "X-Content-Type-Options: nosniff\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body
    with contextlib.suppress(OSError):
        # Read what was peeked, so that closing sends the answer and a FIN, not a reset.
        sock.recv(peeked)
        sock.send(response)
    with contextlib.suppress(OSError):
        sock.close()
