"""Models evaluated side by side on target slices: each fork's slice, the rest, validation.

A *target* is a set of samples: a fork's slice of the training set, the *rest* of the
training set (every training sample outside the slices compared, at most ``rest_max`` of
them: a fixed random sample, the same for every model) or the whole validation set.
:func:`evaluate` runs one model over all the targets with the per-sample scan
(:func:`onthefly.samples.scan.run_scan`: eval mode, ``no_grad``, forked RNGs, modes put back,
the run's loaders never iterated): one pass over the union of the training targets and one
over the validation set. Each target gets the mean per-sample loss and, for class-index
targets, the accuracy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import nn
from torch.utils.data import DataLoader

from onthefly.forks.slice_loader import subset_loader
from onthefly.samples.loss_spec import LossSpec
from onthefly.samples.scan import run_scan

REST_SEED = 0
"""Seed of the sample of the rest of the training set (the same in every comparison)."""


@dataclass(frozen=True)
class Target:
    """Samples to evaluate on: ``kind`` ``slice`` (a fork's), ``rest`` or ``val``."""

    name: str
    kind: str
    split: str
    indices: np.ndarray | None = None
    """Training-set indices; ``None`` for the whole validation set."""

    def to_json(self, samples: int) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "split": self.split, "samples": samples}


@dataclass(frozen=True)
class Score:
    """One model on one target: mean loss, accuracy (class targets) and samples evaluated."""

    loss: float | None
    accuracy: float | None
    samples: int


def targets(
    slices: Mapping[str, Sequence[int]], train_size: int, has_val: bool, rest_max: int
) -> list[Target]:
    """Each slice, the rest of the training set (sampled down to ``rest_max``), validation."""
    found = [
        Target(name, "slice", "train", np.asarray(list(ids), dtype=np.int64))
        for name, ids in slices.items()
    ]
    taken = np.zeros(train_size, dtype=bool)
    for target in found:
        taken[target.indices] = True
    rest = np.flatnonzero(~taken)
    if len(rest) > rest_max:
        picked = np.random.default_rng(REST_SEED).choice(len(rest), rest_max, replace=False)
        rest = np.sort(rest[picked])
    if len(rest):
        found.append(Target("rest", "rest", "train", rest))
    if has_val:
        found.append(Target("val", "val", "val"))
    return found


class Evaluator:
    """Evaluates models on a fixed list of targets.

    Args:
        targets: from :func:`targets`.
        train_loader: the run's training ``DataLoader`` (its settings; never iterated).
        val_loader: the run's validation loader (a ``val`` target needs it).
        spec: the run's loss function (:func:`~onthefly.samples.loss_spec.describe_loss`).
        cancelled: checked before each batch; ``True`` abandons the evaluation.

    Example:
        >>> evaluator = Evaluator(targets(...), train, val, spec)  # doctest: +SKIP
        >>> evaluator.scores(model)["val"].loss  # doctest: +SKIP
    """

    def __init__(
        self,
        targets: list[Target],
        train_loader: DataLoader,
        val_loader: Any,
        spec: LossSpec,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        self.targets = targets
        self.spec = spec
        self.cancelled = cancelled
        self._val_loader = val_loader
        train = [t.indices for t in targets if t.split == "train" and t.indices is not None]
        self._union = np.unique(np.concatenate(train)) if train else np.zeros(0, np.int64)
        self._train = (
            subset_loader(train_loader, self._union.tolist(), shuffle=False, drop_last=False)
            if len(self._union)
            else None
        )

    def scores(self, model: nn.Module) -> dict[str, Score] | None:
        """``{target name: Score}`` of ``model``; ``None`` when cancelled."""
        found: dict[str, Score] = {}
        if self._train is not None:
            losses = self._pass(model, self._train, "train")
            if losses is None:
                return None
            loss, correct = losses
            for target in self.targets:
                if target.split == "train" and target.indices is not None:
                    rows = np.searchsorted(self._union, target.indices)
                    found[target.name] = _score(loss[rows], correct[rows])
        if any(t.kind == "val" for t in self.targets):
            losses = self._pass(model, self._val_loader, "val")
            if losses is None:
                return None
            found["val"] = _score(*losses)
        return found

    def table(self, scores: Sequence[Mapping[str, Score]]) -> dict[str, Any]:
        """``targets`` (with sample counts) and, per model, its ``loss`` and ``accuracy``
        lists aligned with them."""
        first = scores[0] if scores else {}
        return {
            "targets": [
                t.to_json(first[t.name].samples if t.name in first else 0) for t in self.targets
            ],
            "rows": [
                {
                    "loss": [s[t.name].loss for t in self.targets],
                    "accuracy": [s[t.name].accuracy for t in self.targets],
                }
                for s in scores
            ],
        }

    def _pass(
        self, model: nn.Module, loader: Any, split: str
    ) -> tuple[np.ndarray, np.ndarray] | None:
        result = run_scan(
            model, loader, self.spec, split=split, step=0, epoch=0, cancelled=self.cancelled
        )
        if result is None:
            return None
        return result.loss.astype(np.float64), result.correct.astype(np.float64)


def _score(loss: np.ndarray, correct: np.ndarray) -> Score:
    finite = np.isfinite(loss)
    known = np.isfinite(correct)
    return Score(
        loss=float(loss[finite].mean()) if finite.any() else None,
        accuracy=float(correct[known].mean()) if known.any() else None,
        samples=len(loss),
    )
