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

Commands that run on rank 0 alone may be long (a fork trains, a comparison evaluates): the
other ranks then wait for step 5. Such a command calls :meth:`RankSync.keepalive` between
its batches, which repeats "still busy" to them at most every :data:`KEEPALIVE_S`, so no
rank sits in one collective for longer than one of rank 0's batches; and it may ask every
rank to run a registered function with it (:meth:`RankSync.call`, e.g. to copy rank 0's
merged weights everywhere). To keep the order of the collectives the same on every rank,
a round runs the collective commands first: a collective command that came after one of
rank 0's own waits for the next round, held at once at the same batch boundary, as do the
commands that came in while a long command ran.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from onthefly.distributed import cursor as cursors
from onthefly.distributed.exchange import Exchange
from onthefly.distributed.group import ControlGroup
from onthefly.distributed.mirror import MirrorCommand, encode, is_collective
from onthefly.distributed.schedule import Spacing, fixed_interval
from onthefly.drivers.base import TrainerHost
from onthefly.errors import DistributedError

if TYPE_CHECKING:
    from onthefly.commands.registry import Boundary, CommandRegistry
    from onthefly.server import PendingCommand

RUN, HOLD, STOP, HOLD_END = 0, 1, 2, 3
"""Rank 0's decisions: go on, hold (paused), stop, hold at the end of the run."""

HOLDS = (HOLD, HOLD_END)

EXCHANGE_EVERY = 64
"""Batches between two data exchanges at most, while nothing else asks for one."""

KEEPALIVE_S = 0.2
"""Most seconds between two collectives the held ranks see while rank 0 runs a long command
(the wait slice of a paused run: Ctrl+C stays prompt on every rank)."""

_AFTER_COMMANDS = -1  # header: the decision is broadcast once the commands ran
# What rank 0 may send the other ranks while they wait for the decision after commands:
_BUSY = -2  # still running one of its own commands: wait on
_CALL = -3  # run the registered function named next, with its argument, then wait on
_AGAIN = -4  # commands are left for another round at this same boundary
_NO_EXCHANGE, _EXCHANGE, _FORCED = 0, 1, 2


RankCall = Callable[["Boundary", Any, ControlGroup], None]
"""``fn(boundary, argument, group)``: what :meth:`RankSync.call` runs on every rank."""


class Inbox(Protocol):
    """Rank 0's commands (the run's session): taken at a round, routed to their handlers."""

    commands: CommandRegistry

    def take_commands(self, wait: bool = False) -> list[PendingCommand]:
        """Every command waiting now; with ``wait``, up to one slice for the first."""
        ...


class Gate(Protocol):
    """The part that owns pausing (``PauseGate``): it decides on rank 0 and applies everywhere."""

    def decision(self, trainer: TrainerHost) -> int:
        """Rank 0's decision now: :data:`RUN`, :data:`HOLD`, :data:`HOLD_END` or :data:`STOP`."""
        ...

    def apply(self, trainer: TrainerHost, decision: int) -> None:
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

    def __init__(self, session: Inbox) -> None:
        self.session = session
        self.group: ControlGroup | None = None
        self.active = False
        """Whether this run has several ranks and the control group is formed (an attribute:
        it is read at every batch end)."""
        self.exchange = Exchange()
        self.reports: dict[int, cursors.Cursor] = {}
        self._spacing = Spacing()
        self._interval = 1
        self._since = 0
        self._since_exchange = 0
        self._position: tuple[Any, int] | None = None
        self._deferred: list[PendingCommand] = []
        self._calls: dict[str, RankCall] = {}
        self._serving: Boundary | None = None
        self._rest: deque[PendingCommand] = deque()
        self._last_beat = 0.0
        self._broken: DistributedError | None = None
        self.exchange.provide("cursor", self._cursor)
        self.exchange.consume("cursor", self._record)

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

    def start(self, trainer: TrainerHost) -> None:
        """Form the control group (call on every rank when fit starts; once is enough).

        Raises:
            DistributedError: a rank did not join.
        """
        if self.group is not None or int(trainer.world_size) <= 1:
            return
        self.group = ControlGroup.join()
        self.active = True
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
        pending = self._take(group, wait=False)
        try:
            while True:
                decision = self._one_round(group, boundary, gate, pending, final)
                if decision == _AGAIN:
                    pending = self._take(group, wait=False)
                    continue
                gate.apply(boundary.trainer, decision)
                if decision not in HOLDS:
                    return
                pending = self._take(group, wait=True)
        finally:
            self._spacing.round_ended()

    def _take(self, group: ControlGroup, wait: bool) -> list[PendingCommand]:
        """Rank 0: the commands left from the last round, then those in the inbox."""
        if not group.is_zero:
            return []
        left, self._deferred = self._deferred, []
        return left + self.session.take_commands(wait=wait and not left)

    def defer(self, commands: list[PendingCommand]) -> None:
        """Rank 0: run ``commands`` in another round at this boundary (in order, after those
        already waiting), e.g. what came in while a long command ran."""
        self._deferred.extend(commands)

    def _one_round(
        self,
        group: ControlGroup,
        boundary: Boundary,
        gate: Gate,
        pending: list[PendingCommand],
        final: bool,
    ) -> int:
        header = None
        collective: list[PendingCommand] = []
        if group.is_zero:
            pending, later = _collective_first(pending)
            self._deferred[:0] = later
            collective = [cmd for cmd in pending if is_collective(cmd.command)]
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
        if decision != _AFTER_COMMANDS:
            return decision
        if not group.is_zero:
            return self._follow(group, boundary)
        if self._broken is not None:  # a keepalive failed: the run cannot go on
            raise self._broken
        mine = _AGAIN if self._deferred else gate.decision(boundary.trainer)
        return group.broadcast_ints([mine], 1, "control decision")[0]

    def _follow(self, group: ControlGroup, boundary: Boundary) -> int:
        """Another rank: wait for rank 0's decision, running what it asks for meanwhile."""
        while True:
            value = group.broadcast_ints(None, 1, "control decision")[0]
            if value == _BUSY:
                continue
            if value != _CALL:
                return value
            name, argument = group.broadcast_objects([None, None], "call of every rank")
            self._calls[name](boundary, argument, group)

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
            self._rest = deque(pending)
            while self._rest:
                cmd = self._rest.popleft()
                # Once the collective commands ran, the other ranks wait for the decision:
                # rank 0's own commands may keep them company (keepalive, call).
                self._serving = None if is_collective(cmd.command) else boundary
                self._last_beat = time.monotonic()
                try:
                    commands.dispatch(boundary, cmd)
                finally:
                    self._serving = None
            return
        for data in copies:
            commands.dispatch(boundary, MirrorCommand(data, group.rank))  # type: ignore[arg-type]

    def take_rest(self) -> list[PendingCommand]:
        """Rank 0, inside one of its own commands: take the commands of this round that come
        after it (rank 0's own too, by construction), e.g. a ``cancel`` sent right after a fork
        and taken from the inbox with it."""
        if self._serving is None:
            return []
        rest = list(self._rest)
        self._rest.clear()
        return rest

    def keepalive(self) -> bool:
        """Rank 0, inside one of its own commands: tell the waiting ranks it is still busy,
        at most every :data:`KEEPALIVE_S` (a no-op elsewhere, and in a single-process run).

        Call it between the batches of a long command, so that no rank waits in one
        collective for longer than a batch (rather than the whole command, which could
        exceed the collective timeout).

        Returns:
            ``True`` once the other ranks are lost: the command should stop (the round then
            raises the :class:`~onthefly.errors.DistributedError`).
        """
        group = self.group
        if self._broken is not None:
            return True
        if group is None or self._serving is None:
            return False
        now = time.monotonic()
        if now - self._last_beat < KEEPALIVE_S:
            return False
        try:
            group.broadcast_ints([_BUSY], 1, "control decision (rank 0 busy with a command)")
        except DistributedError as exc:
            self._broken = exc
            return True
        self._last_beat = time.monotonic()
        return False

    def on_call(self, name: str, fn: RankCall) -> None:
        """Register ``fn(boundary, argument, group)`` for :meth:`call` (on every rank).

        Raises:
            ValueError: ``name`` is taken.
        """
        if name in self._calls:
            raise ValueError(f"the rank call {name!r} is already registered")
        self._calls[name] = fn

    def call(self, name: str, argument: Any = None) -> None:
        """Rank 0, inside one of its own commands: run the registered ``name`` on every rank
        (rank 0 too, last to start), e.g. collectives that copy rank 0's state everywhere.

        Args:
            name: registered with :meth:`on_call` on every rank.
            argument: picklable; handed to each rank's function.

        Raises:
            DistributedError: another rank died or hung.
            RuntimeError: not on rank 0 inside one of its own commands in a distributed run.
        """
        group, boundary = self.group, self._serving
        if group is None or boundary is None or not group.is_zero:
            raise RuntimeError(
                "RankSync.call runs on rank 0 inside one of its own commands of a distributed run"
            )
        if self._broken is not None:
            raise self._broken
        fn = self._calls[name]
        group.broadcast_ints([_CALL], 1, "control decision (a call of every rank)")
        group.broadcast_objects([name, argument], "call of every rank")
        fn(boundary, argument, group)
        self._last_beat = time.monotonic()

    def cursor(self, trainer: TrainerHost, batches: int) -> cursors.Cursor:
        """This rank's cursor after ``batches`` batches of the current epoch."""
        rank = self.group.rank if self.group is not None else 0
        return cursors.capture(trainer, rank, batches, self.step_time_s)

    def _cursor(self, force: bool) -> cursors.Cursor | None:
        if self._position is None:
            return None
        return self.cursor(*self._position)

    def _record(self, rank: int, report: cursors.Cursor) -> None:
        self.reports[rank] = report


def _collective_first(
    pending: list[PendingCommand],
) -> tuple[list[PendingCommand], list[PendingCommand]]:
    """``(this round's, the next round's)``: a round runs its collective commands before any
    of rank 0's own, so the commands are cut before a collective one that follows one of
    rank 0's own (the order stays the arrival order)."""
    for i in range(1, len(pending)):
        if is_collective(pending[i].command) and not is_collective(pending[i - 1].command):
            return pending[:i], pending[i:]
    return pending, []
