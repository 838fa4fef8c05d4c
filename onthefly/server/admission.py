"""Which connections the session server takes on, before any thread is spent on them.

Sans I/O (time is passed in): :class:`Admission` counts the connections handed to the
websocket library and decides, for each request whose head has been read, whether it gets
a thread or a short refusal. The front door (:mod:`onthefly.server.front_door`) does the
I/O. The rules:

* **Waiting connections** (accepted, request head not read yet) hold no thread. At most
  :attr:`Limits.max_waiting` wait; a new one beyond that closes the one that waited longest,
  so idle sockets cannot lock a real client out. Each must send its request head within
  :attr:`Limits.handshake_timeout` seconds.
* **Authenticated websockets** (our ``Host``, an allowed ``Origin``, the token): at most
  :attr:`Limits.max_connections` at once; one more is answered 503.
* **Everything else** (pages, ``/sessions``, refused upgrades): at most
  :attr:`Limits.max_unauthenticated` in progress at once (503 beyond), and per source
  address at most :attr:`Limits.source_rate` per second in bursts of
  :attr:`Limits.source_burst` (429 beyond). A client with the token is never rate-limited
  by another process's flood.

Each connection handed over costs the websocket library two threads (its handler and its
reader) and an authenticated one a third (our sender), so the server's threads are bounded
by ``1 + 3 * max_connections + 2 * max_unauthenticated``.
"""

from __future__ import annotations

import http
from dataclasses import dataclass
from enum import Enum

from onthefly.server.commands import TokenBucket


@dataclass(frozen=True)
class Limits:
    """Connection limits of one session server.

    Attributes:
        max_waiting: connections whose request head has not arrived yet.
        handshake_timeout: seconds a connection may take to send its request head, and then
            to finish the websocket handshake.
        max_head_bytes: the largest request head read (431 beyond).
        max_connections: authenticated websockets at once.
        max_unauthenticated: other requests being answered at once.
        source_rate: unauthenticated requests per second from one source address.
        source_burst: bursts of them.
        max_sources: source addresses whose rate is tracked (the idlest are forgotten).
    """

    max_waiting: int = 128
    handshake_timeout: float = 5.0
    max_head_bytes: int = 16 << 10
    max_connections: int = 64
    max_unauthenticated: int = 16
    source_rate: float = 20.0
    source_burst: float = 100.0
    max_sources: int = 1024

    @property
    def max_threads(self) -> int:
        """The most threads the server runs: its front door, plus those of the connections."""
        return 1 + 3 * self.max_connections + 2 * self.max_unauthenticated


class Kind(Enum):
    """What a request is, once its head has been read."""

    AUTHENTICATED = "authenticated"
    OTHER = "other"


@dataclass(frozen=True)
class Refusal:
    """The short answer a request gets instead of a thread."""

    status: http.HTTPStatus
    text: str


class Admission:
    """Counts what the websocket library serves and decides what it may take on.

    Not thread-safe on its own: the front door holds its lock around every call.

    Example:
        >>> admission = Admission(Limits(max_connections=1))
        >>> admission.admit(Kind.AUTHENTICATED, "127.0.0.1", now=0.0) is None
        True
        >>> admission.admit(Kind.AUTHENTICATED, "127.0.0.1", now=0.0).status
        <HTTPStatus.SERVICE_UNAVAILABLE: 503>
    """

    def __init__(self, limits: Limits = Limits()) -> None:
        self.limits = limits
        self._serving = {Kind.AUTHENTICATED: 0, Kind.OTHER: 0}
        self._sources: dict[str, TokenBucket] = {}

    def serving(self, kind: Kind) -> int:
        """How many requests of ``kind`` the websocket library is serving now."""
        return self._serving[kind]

    def admit(self, kind: Kind, source: str, now: float) -> Refusal | None:
        """Count a request of ``kind`` from ``source`` in, or say why not.

        Returns:
            ``None`` when it is handed over (call :meth:`release` when it ends), else the
            refusal to answer it with.
        """
        limits = self.limits
        if kind is Kind.AUTHENTICATED:
            if self._serving[kind] >= limits.max_connections:
                return Refusal(
                    http.HTTPStatus.SERVICE_UNAVAILABLE,
                    f"This session already has {limits.max_connections} connections; expected "
                    "fewer: close a dashboard or client and try again.\n",
                )
        else:
            if not self._bucket(source, now).allow(now):
                return Refusal(
                    http.HTTPStatus.TOO_MANY_REQUESTS,
                    f"Too many requests from {source}; expected at most "
                    f"{limits.source_rate:g} a second without the session's token.\n",
                )
            if self._serving[kind] >= limits.max_unauthenticated:
                return Refusal(
                    http.HTTPStatus.SERVICE_UNAVAILABLE,
                    f"{limits.max_unauthenticated} requests without the session's token are "
                    "being answered; try again in a moment.\n",
                )
        self._serving[kind] += 1
        return None

    def release(self, kind: Kind) -> None:
        """A request counted in by :meth:`admit` has ended."""
        self._serving[kind] -= 1

    def _bucket(self, source: str, now: float) -> TokenBucket:
        bucket = self._sources.pop(source, None)
        if bucket is None:
            if len(self._sources) >= self.limits.max_sources:
                # Forget the source seen least recently (dicts keep insertion order).
                del self._sources[next(iter(self._sources))]
            bucket = TokenBucket(rate=self.limits.source_rate, burst=self.limits.source_burst)
        self._sources[source] = bucket  # most recent last
        return bucket
