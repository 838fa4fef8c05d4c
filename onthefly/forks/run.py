"""What the fork commands use of the run they act on, and their refusals.

:func:`run_parts` finds the run's model, its one optimizer, the training ``DataLoader``, the
validation loader and the loss function, under either driver (through the per-sample
features' sources: the native trainer's own attributes, or what the user gave
``attach_lightning`` / ``OnTheFly``, the trainer and the module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from onthefly.callbacks import _sample_sources
from onthefly.callbacks._consensus import distributed
from onthefly.forks.compare import Evaluator, Target
from onthefly.forks.spawn import training_data
from onthefly.protocol import ErrorCode
from onthefly.samples.capture import LossSpec, describe_loss


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


def run_parts(trainer: Any, inputs: Any) -> RunParts:
    """The parts of the run ``trainer`` drives.

    Raises:
        Refused: a distributed run, or not exactly one optimizer.
        ConfigurationError: no training ``DataLoader`` over a map-style dataset.
    """
    if distributed(trainer):
        raise Refused(
            "unsupported",
            f"forks and merges are not supported in distributed runs yet (world_size="
            f"{trainer.world_size}); expected a single-process run",
        )
    optimizers = list(trainer.optimizers)
    if len(optimizers) != 1:
        raise Refused(
            "unsupported",
            f"forks need a run with exactly one optimizer; this one has {len(optimizers)}",
        )
    loss_fn = _sample_sources.loss_fn(trainer, inputs)
    return RunParts(
        model=trainer.lightning_module,
        optimizer=optimizers[0],
        train=training_data(_sample_sources.split_loader(trainer, inputs, "train")),
        val=_sample_sources.split_loader(trainer, inputs, "val"),
        spec=describe_loss(loss_fn) if loss_fn is not None else None,
    )


def check_paused(state: str, what: str) -> None:
    """Raise :class:`Refused` unless the run's ``state`` is ``paused``."""
    if state != "paused":
        raise Refused("invalid_state", f"{what} needs a paused run (it is {state}); pause it first")
