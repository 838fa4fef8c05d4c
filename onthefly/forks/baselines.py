"""What a fork must beat: the parent trained on for the fork's budget, on copies.

A fork trained on a hard slice looks good next to its parent, which stopped training when
the fork started. The honest comparison spends the same compute on the parent instead:

* ``continue`` — a copy of the parent trained on the whole training set for as many
  optimizer steps as the fork took (the run's loader settings, a clone of its optimizer with
  its state and current hyperparameters: what resuming would do, without the schedule);
* ``oversample`` — the same, with the fork's slice drawn as :data:`OVERSAMPLE_SHARE` of the
  samples (:func:`~onthefly.forks.mixing.oversample_loader`): the fix by hand a fork
  competes with.

Each trains like a fork (:func:`~onthefly.forks.spawn.train_fork`: the run's step, device,
precision and clipping, every RNG forked, nothing streamed), so the parent is untouched bit
for bit. A baseline needs the model the fork started from: forks made before the run trained
on (or before a merge replaced the model) get none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from onthefly.drivers.base import TrainerHost
from onthefly.forks.mixing import OVERSAMPLE_SHARE, oversample_loader
from onthefly.forks.registry import ForkRecord
from onthefly.forks.run import RunParts
from onthefly.forks.slice_loader import subset_loader
from onthefly.forks.spawn import Budget, fork_optimizer, model_copy, train_fork
from onthefly.forks.stream import ForkStream
from onthefly.protocol import EventBody

KINDS = ("continue", "oversample")


@dataclass(frozen=True)
class Baseline:
    """One baseline to train: its row name, kind, the fork it answers and its steps."""

    name: str
    kind: str
    fork: str
    steps: int

    def row(self) -> dict[str, Any]:
        return {"model": self.name, "run": None, "kind": self.kind, "fork": self.fork}


def plan(records: list[ForkRecord], active: str, step: int) -> tuple[list[Baseline], list[str]]:
    """The baselines of ``records`` (one ``continue`` per distinct budget, one ``oversample``
    per fork), and a note for each fork that gets none.

    Args:
        records: the compared forks.
        active: the lineage node the run trains now.
        step: the run's step now.
    """
    planned: list[Baseline] = []
    notes: list[str] = []
    for record in records:
        if record.parent != active or record.parent_step != step:
            notes.append(
                f"no baselines for fork {record.name!r}: it was forked at step "
                f"{record.parent_step} from another model than the one at step {step}"
            )
            continue
        if not record.steps:
            continue
        if all(b.name != f"continue-{record.steps}" for b in planned):
            planned.append(
                Baseline(f"continue-{record.steps}", "continue", record.name, record.steps)
            )
        planned.append(
            Baseline(f"oversample-{record.name}", "oversample", record.name, record.steps)
        )
    return planned, notes


def train(
    trainer: TrainerHost,
    parts: RunParts,
    baseline: Baseline,
    indices: list[int],
    cancelled: Callable[[], bool],
) -> tuple[nn.Module | None, str | None]:
    """A copy of the parent trained as ``baseline`` says (``indices``: its fork's slice).

    Returns:
        The trained copy, or ``None`` with why (cancelled, or the message of a failure).
    """
    model = model_copy(parts.model)
    optimizer = fork_optimizer(parts.optimizer, parts.model, model, "clone")
    if baseline.kind == "continue":
        everything = range(parts.train_size)
        loader = subset_loader(parts.train, everything, persistent_workers=True)
    else:
        loader = oversample_loader(parts.train, indices, OVERSAMPLE_SHARE, persistent_workers=True)
    budget = Budget(steps=baseline.steps)
    stream = ForkStream(_unpublished, baseline.name, 0, baseline.steps, cancelled)
    outcome = train_fork(trainer, model, optimizer, loader, budget, stream)
    if outcome.status != "done":
        return None, outcome.message or outcome.status
    return model, None


def _unpublished(event: EventBody) -> None:
    """A baseline's training is not a run of the session: its events go nowhere."""
