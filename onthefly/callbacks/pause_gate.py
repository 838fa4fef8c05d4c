"""PauseGate: pause, resume and stop a run at the batch boundary.

The training thread looks at the session's inbox between two steps (never blocking while
the run is running): a command that arrives during step ``s`` takes effect when step ``s``
ends, so a pause is acknowledged with the step it holds at. While paused, the thread waits
at that boundary and keeps running the commands that need a quiet model (``test``, …) until
``resume`` or ``stop``. A stop is graceful: ``trainer.should_stop = True`` ends ``fit``
normally, so ``on_train_end`` and ``on_fit_end`` still run; a stop that reaches the run
held at a batch's start (commands that came during validation, the epoch change or the
fetch) also ends the epoch before that batch trains.

With ``hold_at_end`` the gate also holds, paused, at the last step of the run (after the
final test), so the user can keep interacting and extend training with
``resume(epochs=N)`` or ``resume(steps=N)``. Before the end, such a request adds to the
planned end (see :mod:`onthefly.callbacks.limits`): at once when the limits can say where
that is, else once the run reaches it.

In a distributed run only global rank 0 receives commands. The gate then acts at the
control rounds of :class:`~onthefly.distributed.control.RankSync` (every few batches, the
same on every rank): rank 0 decides (run, hold, stop) and every rank follows, so all ranks
pause, resume and stop at the same step; :meth:`PauseGate.decision` and
:meth:`PauseGate.apply` are its two halves.

The gate's batch hooks are called by the run's
:class:`~onthefly.callbacks._recorder.Recorder` only when something waits at the boundary
(a command, a paused run) or the gate asks for every batch (:attr:`Recorder.attend`: a
distributed run's rounds, a hold at the planned end, an extension waiting for it).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly.callbacks import limits
from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.distributed.control import HOLD, HOLD_END, RUN, STOP
from onthefly.drivers import driver
from onthefly.drivers.base import Driver, TrainerHost, distributed
from onthefly.protocol import Position, ResumeReply, StopReply
from onthefly.sessions import loaders

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

KEEP_ALIVE_ENV = "ONTHEFLY_KEEP_ALIVE"


class PauseGate(Callback):
    """Pause / resume / stop at batch boundaries, and the hold at the end of a run.

    Args:
        session: the run's shared session (commands are registered on it).
        recorder: the run's per-batch recorder (it calls the gate's batch hooks).
        hold_at_end: hold, paused, when the stop condition is reached (``do_test_after``).
        keep_alive: whether to hold; ``None`` decides from ``ONTHEFLY_KEEP_ALIVE`` (``0`` or
            ``1``), else holds when a client is connected or stdin is a terminal.

    Example:
        >>> session = RunSession("demo")  # usually created by ``OnTheFly``
        >>> gate = PauseGate(session, Recorder(session, StepClock()))
    """

    def __init__(
        self,
        session: RunSession,
        recorder: Recorder,
        hold_at_end: bool = False,
        keep_alive: bool | None = None,
    ) -> None:
        self.session = session
        self._recorder = recorder
        self.hold_at_end = hold_at_end
        self.keep_alive = keep_alive
        self._at_end = False
        self._deferred = False  # an extension waits for the planned end (limits.defer)
        session.commands.register("pause", self._pause)
        session.commands.register("resume", self._resume)
        session.commands.register("stop", self._stop)

    def _set_deferred(self, waiting: bool) -> None:
        self._deferred = waiting
        self._ask_every_batch()

    def _ask_every_batch(self) -> None:
        # The batch hooks run at every batch for a distributed run's rounds, a hold or test
        # at the planned end (``hold_at_end`` is ``do_test_after``), a waiting extension.
        self._recorder.attend = bool(
            self.session.ranks.active or self.hold_at_end or self._deferred
        )

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._ask_every_batch()

    def on_train_batch_start(
        self, trainer: TrainerHost, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        # Commands that came in during validation, the epoch change or the batch's fetch; in
        # a distributed run they wait for the batch end, where all ranks agree.
        session = self.session
        waiting = session.state == "paused" or session.inbox.waiting
        if not waiting or distributed(trainer):
            return
        if session.state != "paused" and not loaders.exact(trainer, batch_idx):
            # The batch was fetched in this process without its RNG state kept (the command
            # came during the fetch): an export here could not replay it, so the commands
            # run at this batch's end.
            return
        boundary = Boundary(trainer, pl_module)
        session.drain(boundary)
        self._wait(boundary)
        if trainer.should_stop:
            # Stopped while held here: the fetched batch is not trained on. Lightning's epoch
            # loop (2.6), and the native loop alike, end the epoch on this, as on a -1
            # returned by the module's hook.
            raise StopIteration

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # Most steps just go on: the driver and a Boundary are looked up only when something
        # waits here (a command, an extension of the limits, the hold at the end).
        session = self.session
        if session.ranks.active:
            run = driver(trainer)
            limits.apply_deferred(run, batch_idx=batch_idx)
            self._at_round(run, pl_module, batch_idx)
            return
        if session.inbox.waiting:
            session.drain(Boundary(trainer, pl_module))
        if self._deferred or self.hold_at_end:
            self._at_planned_end(trainer, pl_module, batch_idx)
        if session.state == "paused":
            self._wait(Boundary(trainer, pl_module))
        self._at_end = False

    def on_train_epoch_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        # An epoch limit is reached here when the loader's length did not tell at its last batch.
        if limits.apply_deferred(driver(trainer), at_epoch_end=True):
            self._set_deferred(False)

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        limits.forget_deferred(driver(trainer))
        self._set_deferred(False)

    def _at_planned_end(self, trainer: TrainerHost, pl_module: Any, batch_idx: int) -> None:
        run = driver(trainer)
        if self._deferred and limits.apply_deferred(run, batch_idx=batch_idx):
            self._set_deferred(False)
        if self.hold_at_end and not trainer.should_stop and limits.is_final_step(run, batch_idx):
            self._enter_hold(Boundary(trainer, pl_module))

    # ------------------------------------------------------------------ the boundary

    def _wait(self, boundary: Boundary) -> None:
        """Block at the boundary, running commands as they come, until resumed or stopped."""
        if self.session.state != "paused" or boundary.trainer.should_stop:
            return
        session = self.session
        while self.holding(boundary.trainer):
            cmd = session.next_command()
            if cmd is not None:
                session.commands.dispatch(boundary, cmd)

    def holding(self, trainer: TrainerHost) -> bool:
        """Whether the training thread should stay at the boundary (paused, not stopping)."""
        return (
            self.session.state == "paused"
            and self.session.server is not None
            and not trainer.should_stop
            and not driver(trainer).terminating()
        )

    def _at_round(self, run: Driver, pl_module: Any, batch_idx: int) -> None:
        """Distributed: a control round when one is due (always at the final step)."""
        ranks, trainer = self.session.ranks, run.trainer
        final = limits.is_final_step(run, batch_idx)
        if not ranks.due(final):
            return
        boundary = Boundary(trainer, pl_module)
        if final and self.hold_at_end and not trainer.should_stop:
            self._enter_hold(boundary)  # rank 0 only: it has the session
        ranks.round(boundary, self, batches=batch_idx + 1, final=final)
        self._at_end = False

    def decision(self, trainer: TrainerHost) -> int:
        """Rank 0's decision at a control round: hold (paused or at the end), stop or run."""
        if self.holding(trainer):
            return HOLD_END if self._at_end else HOLD
        return STOP if trainer.should_stop else RUN

    def apply(self, trainer: TrainerHost, decision: int) -> None:
        """Every rank: follow rank 0's ``decision`` (while holding, rounds repeat)."""
        if decision == STOP:
            trainer.should_stop = True
        self._at_end = decision == HOLD_END

    def _enter_hold(self, boundary: Boundary) -> None:
        if not self.session.active:
            return
        if not keep_alive_wanted(self.keep_alive, self.session.has_clients()):
            print(
                "OnTheFly: training reached its stop condition, so the session closes now. To keep "
                f"it open for the dashboard, set {KEEP_ALIVE_ENV}=1 (or OnTheFly(keep_alive=True)) "
                "or connect a dashboard before the end.",
                file=sys.stderr,
            )
            return
        self._at_end = True
        self._enter_pause(boundary.trainer, "stop condition reached")

    # ------------------------------------------------------------------ command handlers

    def _enter_pause(self, trainer: TrainerHost, reason: str) -> None:
        self.session.quiesce()
        self.session.set_state("paused", trainer, reason)

    def _pause(self, boundary: Boundary, cmd: PendingCommand) -> None:
        if self.session.state != "paused":
            self._enter_pause(boundary.trainer, "pause command")
        cmd.reply(Position(**self.session.position(boundary.trainer)))

    def _resume(self, boundary: Boundary, cmd: PendingCommand) -> None:
        trainer = boundary.trainer
        run = driver(trainer)
        epochs = getattr(cmd.command, "epochs", None)
        steps = getattr(cmd.command, "steps", None)
        if self._at_end and epochs is None and steps is None:
            cmd.fail(
                "invalid_state",
                "the run reached its stop condition; train on with `onthefly resume --epochs N` "
                "(or --steps N), or end it with `onthefly stop`",
            )
            return
        if epochs is not None or steps is not None:
            new = limits.extended(
                run.limits(),
                epoch=int(trainer.current_epoch),
                step=int(trainer.global_step),
                epochs=epochs,
                at_end=self._at_end,
                steps=steps,
            )
            if new is None:  # placed at the planned end, once the run gets there
                limits.defer(run, epochs, steps)
                self._set_deferred(True)
            else:
                run.set_limits(new)
        if self.session.state == "paused":
            self.session.set_state("running", trainer, "resume command")
        new_limits = run.limits()
        waiting = limits.deferred(run)
        cmd.reply(
            ResumeReply.model_validate(
                {
                    **self.session.position(trainer),
                    "max_epochs": new_limits.max_epochs,
                    "max_steps": new_limits.max_steps,
                    **({} if waiting is None else {"after_end": _extension_fields(waiting)}),
                }
            )
        )

    def _stop(self, boundary: Boundary, cmd: PendingCommand) -> None:
        boundary.trainer.should_stop = True
        # The run ends after this boundary: the reply says so; its `finished` status follows.
        position = {**self.session.position(boundary.trainer), "state": "stopping"}
        cmd.reply(StopReply(**position, stopping=True))


def _extension_fields(extension: limits.Extension) -> dict[str, int]:
    """A deferred extension as a reply field: what is added once the planned end is reached."""
    fields = {"epochs": extension.epochs, "steps": extension.steps}
    return {name: value for name, value in fields.items() if value is not None}


def keep_alive_wanted(keep_alive: bool | None, has_clients: bool) -> bool:
    """Whether to hold the session open once training reached its stop condition.

    Args:
        keep_alive: an explicit choice, which wins.
        has_clients: whether a dashboard or client is connected.
    """
    if keep_alive is not None:
        return keep_alive
    env = os.environ.get(KEEP_ALIVE_ENV, "").strip()
    if env in ("0", "1"):
        return env == "1"
    if env:
        log.warning("%s=%r is ignored: expected 0 or 1", KEEP_ALIVE_ENV, env)
    return has_clients or _stdin_is_terminal()


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached stdin
        return False
