"""HparamEditor: the ``set`` command — change lr, weight_decay, momentum, betas or eps mid-run.

The change is applied on the training thread at the next batch boundary (at once while
paused; in a distributed run on every rank at the same control round), so the next
optimizer step uses it; a scheduler keeps it (see
:mod:`onthefly.callbacks._hparams`). Every change of every param group is published as an
``hparam_change`` event (the dashboard marks it on the charts) and kept in
:attr:`HparamEditor.changes`, part of the callback's ``state_dict`` and so of exports.

Values are checked before anything changes (the parameters' dtype, and a trial step of the
optimizer on a copy). Should the optimizer's next real step still fail under an accepted edit,
the run survives it (:mod:`onthefly.callbacks._step_guard`): every edit since the last step
that succeeded is rolled back (published as ``hparam_change`` events too), that step's update
is not applied, an ``hparam_error`` event says what the optimizer raised, and the run pauses.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch
from lightning.pytorch import Callback

from onthefly.callbacks._hparams import (
    HPARAMS,
    Change,
    apply_changes,
    plan_changes,
    schedulers_of,
)
from onthefly.callbacks._step_guard import StepGuard
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.protocol import HparamChangeBody, HparamEdit, HparamErrorBody, RolledBack, SetReply

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)


class HparamEditor(Callback):
    """Applies ``set`` commands to the run's optimizers.

    Args:
        session: the run's shared session (the ``set`` command is registered on it).

    Example:
        >>> from onthefly.callbacks.session import RunSession
        >>> editor = HparamEditor(RunSession("demo"))  # usually created by ``OnTheFly``
    """

    def __init__(self, session: RunSession) -> None:
        self.session = session
        self.changes: list[dict[str, Any]] = []
        self._guards: dict[int, StepGuard] = {}
        self._unconfirmed: dict[int, list[Change]] = {}
        """Per optimizer: the changes made since its last step that succeeded."""
        self._trainer: Any = None
        session.commands.register("set", self._on_command)

    def state_dict(self) -> dict[str, Any]:
        return {"changes": [dict(change) for change in self.changes]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.changes = [dict(change) for change in state_dict.get("changes", [])]

    def set(
        self,
        boundary: Boundary,
        values: dict[str, Any],
        group: int | None = None,
        optimizer: int = 0,
    ) -> list[dict[str, Any]]:
        """Change hyperparameters now and publish one ``hparam_change`` per group and name.

        Args:
            boundary: the trainer and module, at a batch boundary.
            values: ``{"lr": 1e-4, "weight_decay": 0.0, "momentum": 0.9, "betas": [0.9, 0.99],
                "eps": 1e-8}`` (any subset; ``None`` values are ignored).
            group: the param group; ``None`` changes every group.
            optimizer: which of the run's optimizers.

        Returns:
            The changes made: ``{step, optimizer, group, name, old, new}`` each.

        Raises:
            ConfigurationError: invalid request (nothing was changed).
        """
        trainer = boundary.trainer
        optimizers = list(trainer.optimizers)
        schedulers = schedulers_of(trainer)
        planned = plan_changes(optimizers, schedulers, values, group=group, optimizer=optimizer)
        apply_changes(optimizers, schedulers, planned)
        self._trainer = trainer
        self._watch(optimizers[optimizer], optimizer, planned)
        return self._record(trainer, planned)

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._release()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._release()

    def _record(self, trainer: TrainerHost, changes: list[Change]) -> list[dict[str, Any]]:
        step = int(trainer.global_step)
        made = [{"step": step, **change.as_dict()} for change in changes]
        for change in made:
            self.session.publish(HparamChangeBody(**change))
        self.changes.extend(made)
        return made

    def _watch(self, opt: torch.optim.Optimizer, index: int, changes: list[Change]) -> None:
        guard = self._guards.get(index)
        if guard is None or guard.optimizer is not opt:
            guard = self._guards[index] = StepGuard(opt, lambda exc: self._failed(index, exc))
        if not guard.armed:  # its last step succeeded: what was unconfirmed is confirmed
            self._unconfirmed[index] = []
        self._unconfirmed[index].extend(changes)
        guard.arm()

    def _failed(self, index: int, exc: Exception) -> None:
        """The optimizer's step raised under unconfirmed edits: undo them and pause."""
        trainer = self._trainer
        undone = [change.undone() for change in reversed(self._unconfirmed.pop(index, []))]
        optimizers = list(trainer.optimizers)
        apply_changes(optimizers, schedulers_of(trainer), undone)
        self._record(trainer, undone)
        message = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        step = int(trainer.global_step) + 1
        log.error(
            "optimizer %d failed at step %d under the hyperparameters just set (%s); the edit "
            "was rolled back and the run paused",
            index,
            step,
            message,
        )
        rolled_back = [
            RolledBack.model_validate(
                {"group": c.group, "name": c.name, "restored": c.new, "rejected": c.old}
            )
            for c in undone
        ]
        session = self.session
        session.publish(
            HparamErrorBody(step=step, optimizer=index, message=message, rolled_back=rolled_back)
        )
        if session.active and session.state != "paused":
            session.quiesce()
            session.set_state("paused", trainer, "the optimizer failed under a set: rolled back")

    def _release(self) -> None:
        for guard in self._guards.values():
            guard.disarm()
        self._guards.clear()
        self._unconfirmed.clear()

    def _on_command(self, boundary: Boundary, cmd: PendingCommand) -> None:
        command = cmd.command
        values = {name: getattr(command, name, None) for name in HPARAMS}
        try:
            made = self.set(
                boundary,
                values,
                group=getattr(command, "group", None),
                optimizer=getattr(command, "optimizer", 0),
            )
        except ConfigurationError as exc:
            cmd.fail("unsupported", str(exc))
            return
        step = int(boundary.trainer.global_step)
        cmd.reply(SetReply(step=step, changes=[HparamEdit(**change) for change in made]))
