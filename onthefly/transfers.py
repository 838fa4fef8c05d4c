"""Device values copied to the host in batches, without the training loop waiting for them.

Reading a CUDA tensor's value (``.item()``, ``.cpu()``) waits for the GPU: done every step
it would stall the training loop. The per-step telemetry and the per-sample losses both keep
their values as device tensors and ship them in batches through :class:`Batches`: every
``every_steps`` rows (or ``every_s`` seconds) the rows become one transfer, whose tensors
start their copy to the host at once (:func:`copy_to_host`: on CUDA a ``non_blocking`` copy
into pinned memory whose completion is polled with ``Event.query()`` at later steps; on the
CPU the tensor is already there); transfers are delivered in order once complete.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import torch


@dataclass
class HostCopy:
    """One tensor's copy on the host, complete once :meth:`ready`."""

    host: torch.Tensor
    event: torch.cuda.Event | None = None

    def ready(self) -> bool:
        """Whether the copy is complete (never waits)."""
        return self.event is None or bool(self.event.query())

    def wait(self) -> None:
        """Wait for the copy to complete."""
        if self.event is not None:
            self.event.synchronize()


def copy_to_host(stacked: torch.Tensor) -> HostCopy:
    """Start copying ``stacked`` to the host (see the module docstring)."""
    device = stacked.device
    if device.type == "cuda":
        host = torch.empty(stacked.shape, dtype=stacked.dtype, pin_memory=True)
        host.copy_(stacked, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(device))
        return HostCopy(host, event)
    # CPU tensors are already on the host; other devices have no event to poll.
    return HostCopy(stacked.to("cpu"))


class Transfer(Protocol):
    """The copies started for one batch of rows."""

    def ready(self) -> bool:
        """Whether every copy is complete (never waits)."""
        ...

    def wait(self) -> None:
        """Wait for every copy."""
        ...


RowT = TypeVar("RowT")
TransferT = TypeVar("TransferT", bound=Transfer)


class Batches(Generic[RowT, TransferT]):
    """Rows added on the training thread, shipped to the host a batch at a time, in order.

    Args:
        start: makes the transfer of a batch of rows (its copies started).
        deliver: receives each complete transfer, in order.
        every_steps: start a transfer after this many rows …
        every_s: … or once this many seconds passed since the last one started.
        clock_every: read the clock every this many rows only (it costs as much as a cheap
            :meth:`add`).
        size: how many rows one added item counts for (``None``: one each); items are then
            batches of rows themselves (see :meth:`add_all`).

    Raises:
        ValueError: ``every_steps`` < 1 or ``every_s`` <= 0.

    Example:
        >>> class Done:  # a transfer of rows already on the host
        ...     def __init__(self, rows): self.rows = rows
        ...     def ready(self): return True
        ...     def wait(self): pass
        >>> shipped = []
        >>> batches = Batches(Done, lambda t: shipped.append(t.rows), every_steps=2, every_s=60)
        >>> batches.add(1); batches.add(2)
        >>> shipped
        [[1, 2]]
    """

    def __init__(
        self,
        start: Callable[[list[RowT]], TransferT],
        deliver: Callable[[TransferT], None],
        every_steps: int,
        every_s: float,
        clock_every: int = 1,
        size: Callable[[RowT], int] | None = None,
    ) -> None:
        if every_steps < 1 or every_s <= 0:
            raise ValueError(
                f"every_steps={every_steps!r} and every_s={every_s!r}: expected every_steps >= 1 "
                "and every_s > 0"
            )
        self._start_transfer = start
        self._deliver_transfer = deliver
        self._every_steps = every_steps
        self._every_s = every_s
        self._clock_every = clock_every
        self._size = size
        self._count = 0  # rows added since the last transfer started
        self._rows: list[RowT] = []
        self._in_flight: deque[TransferT] = deque()
        self._last_start = time.perf_counter()

    def add(self, row: RowT, now: float | None = None) -> None:
        """Record one row (kept as it is); cheap, and never waits for the device.

        Args:
            row: the row.
            now: the caller's ``time.perf_counter()`` reading of this step, if it has one
                (the clock is then not read again).
        """
        self._rows.append(row)
        size = self._size
        count = self._count = self._count + (1 if size is None else size(row))
        if count >= self._every_steps:
            self._start(time.perf_counter() if now is None else now)
        elif count % self._clock_every == 0:
            if now is None:
                now = time.perf_counter()
            if now - self._last_start >= self._every_s:
                self._start(now)
        if self._in_flight:
            self._deliver(wait=False)

    def add_all(self, rows: Sequence[RowT]) -> None:
        """Record several items at once, in order; a transfer starts once ``every_steps`` rows
        (or ``every_s`` seconds) are waiting, so a long run of rows ships in one."""
        pending = self._rows
        pending.extend(rows)
        size = self._size
        self._count += len(rows) if size is None else sum([size(row) for row in rows])
        now = time.perf_counter()
        if self._count >= self._every_steps or now - self._last_start >= self._every_s:
            self._start(now)
        if self._in_flight:
            self._deliver(wait=False)

    def flush(self) -> None:
        """Ship everything recorded so far and wait for it (pause, epoch end, end of run)."""
        if self._rows:
            self._start(time.perf_counter())
        self._deliver(wait=True)

    def _start(self, now: float) -> None:
        rows, self._rows, self._count = self._rows, [], 0
        self._last_start = now
        self._in_flight.append(self._start_transfer(rows))

    def _deliver(self, wait: bool) -> None:
        while self._in_flight:
            head = self._in_flight[0]
            if wait:
                head.wait()
            elif not head.ready():
                return
            self._in_flight.popleft()
            self._deliver_transfer(head)
