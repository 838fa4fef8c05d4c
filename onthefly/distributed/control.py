"""RankSync: what the ranks of a distributed run do together at batch boundaries.

Only global rank 0 serves the session, so only it sees commands; it decides, and the other
ranks follow at the same optimizer step. Every few batches (the interval of
:mod:`onthefly.distributed.schedule`, the same on every rank) all ranks hold a *control
round* at the end of a batch:

1. rank 0 broadcasts a header: the decision (run, hold, hold at the end, stop, or "after
   the commands"), how many collective commands follow, the next interval, and whether
   the ranks exchange data now;
2. the collective commands (:mod:`onthefly.distributed.mirror`) are broadcast, if any;
3. every rank sends rank 0 its cursor and what parts provide (per-sample losses), if due;
4. every rank runs the collective commands, in order (rank 0 also the others, its own);
5. when commands ran, rank 0 broadcasts the decision they led to.

While holding (paused, or at the end of the run), rank 0 waits up to one wait slice for a
command and holds another round, so the other ranks never sit in one collective for long.
A single-process run never starts RankSync: no collective, no cost.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from onthefly.distributed import cursor as cursors
from onthefly.distributed.exchange import Exchange
from onthefly.distributed.group import ControlGroup
from onthefly.distributed.mirror import MirrorCommand, encode, is_collective
from onthefly.distributed.schedule import Spacing, fixed_interval

if TYPE_CHECKING:
    from onthefly.callbacks.commands import Boundary
    from onthefly.callbacks.session import RunSession
    from onthefly.server import PendingCommand

RUN, HOLD, STOP, HOLD_END = 0, 1, 2, 3
"""Rank 0's decisions: go on, hold (paused), stop, hold at the end of the run."""

HOLDS = (HOLD, HOLD_END)

EXCHANGE_EVERY = 64
"""Batches between two data exchanges at most, while nothing else asks for one."""

_AFTER_COMMANDS = -1  # header: the decision is broadcast once the commands ran
_NO_EXCHANGE, _EXCHANGE, _FORCED = 0, 1, 2


class Gate(Protocol):
    """The part that owns pausing (``PauseGate``): it decides on rank 0 and applies everywhere."""

    def decision(self, trainer: Any) -> int:
        """Rank 0's decision now: :data:`RUN`, :data:`HOLD`, :data:`HOLD_END` or :data:`STOP`."""
        ...

    def apply(self, trainer: Any, decision: int) -> None:
        """Act on rank 0's ``decision`` (every rank)."""
        ...


class RankSync:
    """The control rounds and data exchanges of one run's ranks.

    Args:
        session: the run's session (rank 0 takes commands from it; every rank dispatches
            through its command registry).

    Attributes:
        exchange: where parts register what every rank sends rank 0.
        reports: on rank 0, the latest cursor of each rank (from the exchanges).
        group: the control group, ``None`` until :meth:`start` in a distributed run.

    Example:
        >>> sync = RankSync(session)  # doctest: +SKIP  (RunSession makes one: session.ranks)
        >>> sync.start(trainer)  # every rank, when fit starts  # doctest: +SKIP
        >>> if sync.due(final=False):  # doctest: +SKIP
        ...     sync.round(boundary, gate, batches=batch_idx + 1)
    """

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self.group: ControlGroup | None = None
        self.exchange = Exchange()
        self.reports: dict[int, cursors.Cursor] = {}
        self._spacing = Spacing()
        self._interval = 1
        self._since = 0
        self._since_exchange = 0
        self._position: tuple[Any, int] | None = None
        self.exchange.provide("cursor", self._cursor)
        self.exchange.consume("cursor", self._record)

    @property
    def active(self) -> bool:
        """Whether this run has several ranks and the control group is formed."""
        return self.group is not None

    @property
    def interval(self) -> int:
        """Batches between two control rounds, as last agreed."""
        return self._interval

    @property
    def round_cost_s(self) -> float | None:
        """Rank 0: the measured cost of a plain control round (moving average, seconds)."""
        return self._spacing.round_s

    @property
    def step_time_s(self) -> float | None:
        """This rank's measured time per batch between rounds (moving average, seconds)."""
        return self._spacing.step_s

    def start(self, trainer: Any) -> None:
        """Form the control group (call on every rank when fit starts; once is enough).

        Raises:
            DistributedError: a rank did not join.
        """
        if self.group is not None or int(getattr(trainer, "world_size", 1)) <= 1:
            return
        self.group = ControlGroup.join()
        self._spacing = Spacing(fixed_interval())

    def due(self, final: bool) -> bool:
        """Count a batch; whether a round is due after it (always after the final batch)."""
        self._since += 1
        return final or self._since >= self._interval

    def round(self, boundary: Boundary, gate: Gate, batches: int, final: bool = False) -> None:
        """One control round, repeated while rank 0 holds (every rank calls it).

        Args:
            boundary: the trainer and module, at the end of a batch.
            gate: decides on rank 0 and applies the decision on every rank.
            batches: batches of the current epoch trained on (for the cursor).
            final: this is the run's last batch (the exchange is complete).

        Raises:
            DistributedError: another rank died or hung.
        """
        group = self.group
        assert group is not None, "RankSync.round before start"
        self._position = (boundary.trainer, batches)
        self._spacing.round_started(self._since)
        self._since_exchange += self._since
        self._since = 0
        pending = self.session.take_commands() if group.is_zero else []
        try:
            while True:
                decision = self._one_round(group, boundary, gate, pending, final)
                gate.apply(boundary.trainer, decision)
                if decision not in HOLDS:
                    return
                pending = self.session.take_commands(wait=True) if group.is_zero else []
        finally:
            self._spacing.round_ended()

    def _one_round(
        self,
        group: ControlGroup,
        boundary: Boundary,
        gate: Gate,
        pending: list[PendingCommand],
        final: bool,
    ) -> int:
        collective = [cmd for cmd in pending if is_collective(cmd.command)]
        header = None
        if group.is_zero:
            decision = _AFTER_COMMANDS if pending else gate.decision(boundary.trainer)
            urgent = bool(pending) or final or decision != RUN
            header = [decision, len(collective), self._spacing.interval(), self._due(urgent)]
        started = time.monotonic()
        decision, count, interval, exchange = group.broadcast_ints(header, 4, "control round")
        if group.is_zero and decision == RUN:
            self._spacing.measured(time.monotonic() - started)
        self._interval = interval
        copies: list[Any] = [None] * count
        if count:
            if group.is_zero:
                copies = [encode(cmd.command) for cmd in collective]
            group.broadcast_objects(copies, "broadcast of commands")
        if exchange != _NO_EXCHANGE:
            self._since_exchange = 0
            self.exchange.run(group, force=exchange == _FORCED)
        self._dispatch(group, boundary, pending, copies)
        if decision == _AFTER_COMMANDS:
            mine = [gate.decision(boundary.trainer)] if group.is_zero else None
            decision = group.broadcast_ints(mine, 1, "control decision")[0]
        return decision

    def _due(self, urgent: bool) -> int:
        if self._since_exchange == 0:
            return _NO_EXCHANGE
        if urgent:
            return _FORCED
        return _EXCHANGE if self._since_exchange >= EXCHANGE_EVERY else _NO_EXCHANGE

    def _dispatch(
        self,
        group: ControlGroup,
        boundary: Boundary,
        pending: list[PendingCommand],
        copies: list[Any],
    ) -> None:
        commands = self.session.commands
        if group.is_zero:
            for cmd in pending:
                commands.dispatch(boundary, cmd)
            return
        for data in copies:
            commands.dispatch(boundary, MirrorCommand(data, group.rank))  # type: ignore[arg-type]

    def cursor(self, trainer: Any, batches: int) -> cursors.Cursor:
        """This rank's cursor after ``batches`` batches of the current epoch."""
        rank = self.group.rank if self.group is not None else 0
        return cursors.capture(trainer, rank, batches, self.step_time_s)

    def _cursor(self, force: bool) -> cursors.Cursor | None:
        if self._position is None:
            return None
        return self.cursor(*self._position)

    def _record(self, rank: int, report: cursors.Cursor) -> None:
        self.reports[rank] = report
