"""Where one rank stands in its share of the data: its cursor.

A cursor is the rank's step and epoch, the epoch its sampler was set to, and the batches
of the current epoch it trained on. Every rank reports its cursor to rank 0 at each data
exchange (for the Distribution Health check and the dashboard); an export stores each
rank's cursor with its data position and RNG state, so a resume puts every rank back.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from onthefly.distributed.sharding import sampler_epoch
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost


@dataclass(frozen=True)
class Cursor:
    """One rank's position.

    Attributes:
        rank: the global rank.
        step: optimizer steps taken (``global_step``).
        epoch: the current epoch (``current_epoch``).
        sampler_epoch: the epoch the training sampler was last set to; ``None`` when the
            loader has no epoch-aware sampler.
        batches: batches of the current epoch trained on.
        step_time: mean seconds per batch since the previous report (``None``: unknown).
        time: when the cursor was taken (Unix time).
    """

    rank: int
    step: int
    epoch: int
    sampler_epoch: int | None
    batches: int
    step_time: float | None = None
    time: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The cursor as a JSON object."""
        return asdict(self)


def capture(
    trainer: TrainerHost, rank: int, batches: int, step_time: float | None = None
) -> Cursor:
    """``trainer``'s cursor on ``rank`` after ``batches`` batches of the current epoch."""
    return Cursor(
        rank=rank,
        step=int(trainer.global_step),
        epoch=int(trainer.current_epoch),
        sampler_epoch=sampler_epoch(training_loader(trainer)),
        batches=int(batches),
        step_time=step_time,
        time=time.time(),
    )


def training_loader(trainer: TrainerHost) -> Any:
    """The training loader in use (under Lightning: the first of its combined loaders)."""
    loaders = driver(trainer).train_loaders()
    return loaders[0] if loaders else None
