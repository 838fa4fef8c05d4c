"""What the fork commands use of the run they act on, and their refusals.

:func:`run_parts` finds the run's model, its one optimizer, the training ``DataLoader``, the
validation loader and the loss function, under either driver (through the per-sample
features' sources: the native trainer's own attributes, or what the user gave
``attach_lightning`` / ``OnTheFly``, the trainer and the module). In a distributed run these
are rank 0's (the plain module, not its DDP wrapper; the loader with the full dataset, whose
indices the slices are). :class:`LongCommand` is how a fork, a comparison or a merge looks at
the inbox while it runs, and keeps the other ranks of a distributed run waiting safely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn
from torch.utils.data import DataLoader

from onthefly.commands.interrupts import Inbox, Interrupts
from onthefly.commands.registry import Boundary
from onthefly.distributed.control import RankSync
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost, distributed
from onthefly.forks.compare import Evaluator, Target
from onthefly.forks.slice_loader import training_data
from onthefly.protocol import CancelReply, ErrorCode
from onthefly.samples import sources
from onthefly.samples.loss_spec import LossSpec, describe_loss


class Refused(Exception):
    """A command that cannot run now: answered with ``code`` and the message.

    Attributes:
        code: the protocol error code (``invalid_state`` or ``unsupported``).
    """

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code


@dataclass
class RunParts:
    """The run's model, its optimizer, its training and validation data and its loss."""

    model: nn.Module
    optimizer: torch.optim.Optimizer
    train: DataLoader
    val: Any
    spec: LossSpec | None

    @property
    def train_size(self) -> int:
        return len(self.train.dataset)  # type: ignore[arg-type]

    def evaluator(self, found: list[Target], cancelled: Callable[[], bool]) -> Evaluator | None:
        """An evaluator of ``found``; ``None`` without a loss function with a reduction."""
        if self.spec is None:
            return None
        return Evaluator(found, self.train, self.val, self.spec, cancelled)


def run_parts(trainer: TrainerHost, inputs: Any) -> RunParts:
    """The parts of the run ``trainer`` drives.

    Raises:
        Refused: a distributed Lightning run, or not exactly one optimizer.
        ConfigurationError: no training ``DataLoader`` over a map-style dataset.
    """
    if distributed(trainer) and not driver(trainer).distributed_copies:
        raise Refused(
            "unsupported",
            f"forks, comparisons and merges are not supported in distributed Lightning runs "
            f"(world_size={trainer.world_size}); expected a single-process Lightning run, or "
            "onthefly.Trainer under torchrun",
        )
    optimizers = list(trainer.optimizers)
    if len(optimizers) != 1:
        raise Refused(
            "unsupported",
            f"forks need a run with exactly one optimizer; this one has {len(optimizers)}",
        )
    loss_fn = sources.loss_fn(trainer, inputs)
    return RunParts(
        model=trainer.lightning_module,
        optimizer=optimizers[0],
        train=training_data(sources.split_loader(trainer, inputs, "train")),
        val=sources.split_loader(trainer, inputs, "val"),
        spec=describe_loss(loss_fn) if loss_fn is not None else None,
    )


def check_paused(state: str, what: str) -> None:
    """Raise :class:`Refused` unless the run's ``state`` is ``paused``."""
    if state != "paused":
        raise Refused(
            "invalid_state",
            f"{what} needs a paused run (it is {state}); pause it first (`onthefly pause`)",
        )


class RankedInbox(Inbox, Protocol):
    """The run's session, with the control rounds of its ranks."""

    ranks: RankSync


class LongCommand(Interrupts):
    """The inbox seen from inside a fork, a comparison or a merge (see
    :class:`~onthefly.commands.interrupts.Interrupts`), aware of the other ranks.

    In a distributed run such a command runs on rank 0 alone while the other ranks wait for
    the control round to end: :meth:`check`, called between batches, also keeps them company
    (:meth:`~onthefly.distributed.control.RankSync.keepalive`), and :meth:`replay` leaves the
    commands that came in meanwhile to another round at the same boundary, where the
    collective ones reach every rank.
    """

    session: RankedInbox

    def __init__(self, session: RankedInbox, **answer: Any) -> None:
        super().__init__(session, **answer)

    def check(self) -> bool:
        """Take what the inbox holds; ``True`` once a ``cancel`` came or the ranks are lost."""
        ranks = self.session.ranks
        for cmd in ranks.take_rest():  # taken from the inbox with this one, before it ran
            if cmd.command.type == "cancel":
                self.cancelled = True
                cmd.reply(CancelReply(cancelled=True, **self.answer))
            else:
                self.held.append(cmd)
        cancelled = super().check()
        return ranks.keepalive() or cancelled

    def replay(self, boundary: Boundary) -> None:
        """Run the commands that waited, in order (in a distributed run: at the next round)."""
        if not self.session.ranks.active:
            super().replay(boundary)
            return
        held, self.held = self.held, []
        self.session.ranks.defer(held)
