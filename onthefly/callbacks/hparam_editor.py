"""HparamEditor: the ``set`` command — change lr, weight_decay, momentum or betas mid-run.

The change is applied on the training thread at the next batch boundary (at once while
paused; in a distributed run on every rank at the same control round), so the next
optimizer step uses it; a scheduler keeps it (see
:mod:`onthefly.callbacks._hparams`). Every change of every param group is published as an
``hparam_change`` event (the dashboard marks it on the charts) and kept in
:attr:`HparamEditor.changes`, part of the callback's ``state_dict`` and so of exports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly.callbacks._hparams import HPARAMS, apply_changes, plan_changes, schedulers_of
from onthefly.callbacks.commands import Boundary
from onthefly.callbacks.session import RunSession
from onthefly.errors import ConfigurationError

if TYPE_CHECKING:
    from onthefly.server import PendingCommand


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
            values: ``{"lr": 1e-4, "weight_decay": 0.0, "momentum": 0.9, "betas": [0.9, 0.99]}``
                (any subset; ``None`` values are ignored).
            group: the param group; ``None`` changes every group.
            optimizer: which of the run's optimizers.

        Returns:
            The changes made: ``{step, optimizer, group, name, old, new}`` each.

        Raises:
            ConfigurationError: invalid request (nothing was changed).
        """
        trainer = boundary.trainer
        optimizers = list(getattr(trainer, "optimizers", []))
        schedulers = schedulers_of(trainer)
        planned = plan_changes(optimizers, schedulers, values, group=group, optimizer=optimizer)
        apply_changes(optimizers, schedulers, planned)
        step = int(trainer.global_step)
        made = [{"step": step, **change.as_dict()} for change in planned]
        for change in made:
            self.session.publish("hparam_change", **change)
        self.changes.extend(made)
        return made

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
        cmd.reply(step=int(boundary.trainer.global_step), changes=made)
