"""One client's bounded outbound queue, with coalescing of telemetry.

The broker puts frames (replies, snapshots) and stream events in; the client's sender
thread takes them out, as ready-to-send UTF-8 JSON. When more than ``max_events`` events
wait (a slow client), queued telemetry (``metrics``/``steps``/``runtime``/``log``) is dropped
and a single ``coalesced`` notice takes its place; lifecycle events and replies are never
dropped. A client that still has more than ``max_items`` items waiting after that is
declared :attr:`Outbox.overflowed` and gets disconnected (it may reconnect and resubscribe).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from onthefly.protocol import SERVER_MESSAGE, Coalesced

Frame = bytes | Callable[[], bytes]
"""A serialised frame, or a function the sender thread calls to serialise it (so that
heavy rendering such as a snapshot never runs on the broker's or the training thread)."""

TELEMETRY_KINDS = frozenset({"metrics", "steps", "runtime", "log"})
"""Event kinds a slow client may miss (their history stays available through ``history``)."""

MAX_BATCH_EVENTS = 1000
"""Events per ``batch`` frame; bounds a frame to a few hundred kilobytes."""


class StreamEvent(NamedTuple):
    """A serialised stream event, ready to be put into batches."""

    seq: int
    kind: str
    json: bytes


@dataclass
class _Gap:
    """Telemetry skipped for this client, reported as one ``coalesced`` frame."""

    from_seq: int
    to_seq: int
    dropped: int


class Outbox:
    """A thread-safe bounded queue of frames for one client.

    Args:
        max_events: queued stream events above which telemetry is coalesced.
        max_items: queued items (any kind) above which the client is declared overflowed.

    Example:
        >>> box = Outbox()
        >>> box.put(b'{"type":"reply","id":"1","data":{}}')
        >>> box.take(timeout=0)
        [b'{"type":"reply","id":"1","data":{}}']
    """

    def __init__(self, max_events: int = 20_000, max_items: int = 100_000) -> None:
        self._max_events = max_events
        self._max_items = max_items
        self._items: deque[Frame | StreamEvent | _Gap] = deque()
        self._events = 0
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self.overflowed = False
        """Too many items wait even after coalescing: the client must be disconnected."""

    # ----------------------------------------------------------------------------- producers

    def put(self, frame: Frame) -> None:
        """Queue a frame that is never dropped (a reply, a snapshot, a notice)."""
        with self._cond:
            if self._closed:
                return
            self._items.append(frame)
            self._check_overflow()
            self._cond.notify()

    def put_events(self, events: Iterable[StreamEvent]) -> None:
        """Queue stream events in ``seq`` order, coalescing telemetry when over the bound."""
        with self._cond:
            if self._closed:
                return
            before = len(self._items)
            self._items.extend(events)
            self._events += len(self._items) - before
            if self._events > self._max_events:
                self._coalesce()
            self._check_overflow()
            self._cond.notify()

    def reset_stream(self) -> None:
        """Forget queued events and gaps (a new subscription starts from its own snapshot)."""
        with self._cond:
            self._items = deque(
                item for item in self._items if not isinstance(item, StreamEvent | _Gap)
            )
            self._events = 0

    def close(self) -> None:
        """Stop accepting frames; :meth:`take` returns what is left, then ``None``."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ----------------------------------------------------------------------------- consumer

    def take(self, timeout: float | None = None) -> list[bytes] | None:
        """Everything queued, rendered; consecutive events are grouped into batches.

        Waits up to ``timeout`` seconds for something to arrive (``None``: no limit).
        Returns an empty list on timeout and ``None`` once closed and drained. The caller
        calls :meth:`sent` after sending the frames.
        """
        with self._cond:
            self._busy = False
            self._cond.notify_all()
            if not self._items and not self._closed:
                self._cond.wait(timeout)
            if not self._items:
                return None if self._closed else []
            items, self._items = self._items, deque()
            self._events = 0
            self._busy = True
        return list(_render(items))

    def sent(self) -> None:
        """The frames of the last :meth:`take` are on the wire."""
        with self._cond:
            self._busy = False
            self._cond.notify_all()

    def wait_drained(self, timeout: float) -> bool:
        """Wait until every queued frame was taken and sent; ``False`` on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._items and not self._busy, timeout)

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    # ----------------------------------------------------------------------------- internals

    def _coalesce(self) -> None:
        """Drop queued telemetry; one gap, at the first dropped position, reports it."""
        kept: deque[Frame | StreamEvent | _Gap] = deque()
        gap: _Gap | None = None
        events = 0
        for item in self._items:
            if isinstance(item, StreamEvent) and item.kind in TELEMETRY_KINDS:
                gap = _widen(gap, item.seq, item.seq, 1, kept)
            elif isinstance(item, _Gap):
                gap = _widen(gap, item.from_seq, item.to_seq, item.dropped, kept)
            else:
                events += isinstance(item, StreamEvent)
                kept.append(item)
        self._items = kept
        self._events = events

    def _check_overflow(self) -> None:
        if len(self._items) > self._max_items:
            self.overflowed = True


def _widen(gap: _Gap | None, lo: int, hi: int, dropped: int, kept: deque) -> _Gap:
    if gap is None:
        gap = _Gap(lo, hi, 0)
        kept.append(gap)
    gap.from_seq = min(gap.from_seq, lo)
    gap.to_seq = max(gap.to_seq, hi)
    gap.dropped += dropped
    return gap


def _render(items: Iterable[Frame | StreamEvent | _Gap]) -> Iterable[bytes]:
    batch: list[bytes] = []
    for item in items:
        if isinstance(item, StreamEvent):
            batch.append(item.json)
            if len(batch) >= MAX_BATCH_EVENTS:
                yield _batch_frame(batch)
                batch = []
            continue
        if batch:
            yield _batch_frame(batch)
            batch = []
        if isinstance(item, _Gap):
            notice = Coalesced(from_seq=item.from_seq, to_seq=item.to_seq, dropped=item.dropped)
            yield SERVER_MESSAGE.dump_json(notice)
        elif isinstance(item, bytes):
            yield item
        else:
            yield item()
    if batch:
        yield _batch_frame(batch)


def _batch_frame(events: list[bytes]) -> bytes:
    # Events are serialised once by the broker; a batch is only their concatenation.
    return b'{"type":"batch","events":[' + b",".join(events) + b"]}"
