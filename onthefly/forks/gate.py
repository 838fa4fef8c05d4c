"""The check a merge passes before it is applied: never worse than the parent on held-out data.

Every merge is scored before it touches the run, on the validation set when the run has one
(else on the training targets of the report: the slices and a sample of the rest, a weaker
guard since the forks trained on the slices). A merge whose loss there exceeds the parent's
by more than ``tolerance`` (relative: ``merged > parent + tolerance * |parent|``; default
:data:`DEFAULT_TOLERANCE`, so any rise) is reported and not applied unless forced. The same
score chooses merge weights on the grid (:mod:`onthefly.forks.merge_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from onthefly.forks.compare import Evaluator, Score

DEFAULT_TOLERANCE = 0.0
"""How much worse than the parent (relative validation loss) an applied merge may be."""


@dataclass(frozen=True)
class Verdict:
    """The parent's and the merge's held-out loss, and whether the merge may be applied.

    Attributes:
        target: ``val``, or ``train`` (the training targets) without validation data.
        parent: the parent's loss there (``None``: could not be computed).
        merged: the merged model's.
        tolerance: the relative rise allowed.
        passed: ``merged <= parent + tolerance * |parent|`` (a merge without a finite loss
            fails; nothing to compare with, it passes).
    """

    target: str
    parent: float | None
    merged: float | None
    tolerance: float
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "parent": self.parent,
            "merged": self.merged,
            "tolerance": self.tolerance,
            "passed": self.passed,
        }

    def reason(self) -> str:
        """Why the merge was not applied (for a verdict that did not pass)."""
        where = "validation" if self.target == "val" else "training-target"
        if self.merged is None:
            return f"the merged model has no finite {where} loss"
        allowed = f" + {self.tolerance:.0%}" if self.tolerance else ""
        return (
            f"the merged model's {where} loss {self.merged:.4g} is above the parent's "
            f"{self.parent:.4g}{allowed}; it was not applied (force=True applies it, a larger "
            "tolerance lets it through)"
        )


def held_out_loss(scores: Mapping[str, Score]) -> tuple[str, float | None]:
    """The loss a merge is judged on: ``val``'s, else the sample-weighted mean of the
    training targets'."""
    if "val" in scores:
        return "val", scores["val"].loss
    known = [s for s in scores.values() if s.loss is not None and s.samples > 0]
    total = sum(s.samples for s in known)
    if not total:
        return "train", None
    return "train", sum(s.loss * s.samples for s in known if s.loss is not None) / total


def check(before: Mapping[str, Score], after: Mapping[str, Score], tolerance: float) -> Verdict:
    """Whether the merged model (``after``) may replace the parent (``before``)."""
    target, parent = held_out_loss(before)
    _, merged = held_out_loss(after)
    if parent is None:
        passed = True
    elif merged is None or not math.isfinite(merged):
        passed = False
    else:
        passed = merged <= parent + tolerance * abs(parent)
    return Verdict(target, parent, merged, tolerance, passed)


def scorer(evaluator: Evaluator) -> Callable[[nn.Module], float]:
    """``score(model)``: its held-out loss on ``evaluator``'s targets (``NaN`` when the
    evaluation was cancelled or gave no loss)."""

    def score(model: nn.Module) -> float:
        scores = evaluator.scores(model)
        loss = None if scores is None else held_out_loss(scores)[1]
        return math.nan if loss is None else loss

    return score
