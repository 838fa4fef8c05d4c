"""The check a merge passes before it is applied: never worse than the parent on held-out data.

Every merge is scored before it touches the run, on the validation set when the run has one
(else on the training targets of the report: the slices and a sample of the rest, a weaker
guard since the forks trained on the slices). The figure is the **error rate** when the loss
has class targets (what "worse" means for a classifier; greedy soups choose on held-out
accuracy too, Wortsman et al. 2022), with the loss breaking ties, else the **loss**. A merge
whose figure exceeds the parent's by more than ``tolerance`` (relative:
``merged > parent + tolerance * |parent|``; default :data:`DEFAULT_TOLERANCE`, so any rise)
is reported and not applied unless forced. The same figure chooses merge weights on the grid
(:mod:`onthefly.forks.merge_grid`) and the members of a greedy soup.

The loss alone misleads here: a parent stopped early is under-confident everywhere, so
nearly any merge with a sharper specialist lowers the validation loss, also one that gets
more samples wrong (on the digits benchmark of docs/forks.md, a soup that lowered the
validation loss by 15 % lost 1.5 points of validation accuracy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn

from onthefly.forks.compare import Evaluator, Score

DEFAULT_TOLERANCE = 0.0
"""How much worse than the parent (relative to its figure) an applied merge may be."""

TIE_BREAK = 1e-9
"""The loss's weight in the figure of class targets: it only orders equal error rates (one
sample of a million validation samples moves the error rate by 1e-6)."""


@dataclass(frozen=True)
class Figure:
    """What a model is judged on: ``error`` (with the loss as a tie-break) or ``loss``."""

    target: str
    """``val``, or ``train`` (the training targets) without validation data."""
    metric: str
    error: float | None
    loss: float | None

    @property
    def value(self) -> float | None:
        """Lower is better; ``None`` when it could not be computed."""
        if self.metric == "error":
            if self.error is None:
                return None
            return self.error + TIE_BREAK * (self.loss if self.loss is not None else 0.0)
        return self.loss


def figure(scores: Mapping[str, Score]) -> Figure:
    """The figure of ``scores``: ``val``'s, else the sample-weighted mean of the training
    targets'."""
    if "val" in scores:
        chosen, target = [scores["val"]], "val"
    else:
        chosen, target = [s for s in scores.values() if s.samples > 0], "train"
    error = _mean([(None if s.accuracy is None else 1 - s.accuracy, s.samples) for s in chosen])
    loss = _mean([(s.loss, s.samples) for s in chosen])
    return Figure(target, "error" if error is not None else "loss", error, loss)


def _mean(values: list[tuple[float | None, int]]) -> float | None:
    known = [(v, n) for v, n in values if v is not None and math.isfinite(v) and n > 0]
    total = sum(n for _, n in known)
    return sum(v * n for v, n in known) / total if total else None


@dataclass(frozen=True)
class Verdict:
    """The parent's and the merge's figures, and whether the merge may be applied.

    ``passed``: the merge's figure is at most ``parent + tolerance * |parent|`` (a merge
    without a figure fails; a parent without one leaves nothing to compare with: passed).
    """

    parent: Figure
    merged: Figure
    tolerance: float
    passed: bool

    def to_json(self) -> dict[str, Any]:
        p, m = self.parent, self.merged
        return {
            "target": p.target,
            "metric": p.metric,
            "parent": {"error": p.error, "loss": p.loss},
            "merged": {"error": m.error, "loss": m.loss},
            "tolerance": self.tolerance,
            "passed": self.passed,
        }

    def reason(self) -> str:
        """Why the merge was not applied (for a verdict that did not pass)."""
        where = "validation" if self.parent.target == "val" else "training-target"
        metric = "error rate" if self.parent.metric == "error" else "loss"
        theirs = getattr(self.merged, self.parent.metric)
        if theirs is None:
            return f"the merged model has no finite {where} {metric}"
        ours = getattr(self.parent, self.parent.metric)
        allowed = f" + {self.tolerance:.0%}" if self.tolerance else ""
        tie = " (equal error, higher loss)" if metric == "error rate" and theirs == ours else ""
        return (
            f"the merged model's {where} {metric} {theirs:.4g} is above the parent's "
            f"{ours:.4g}{allowed}{tie}; it was not applied (force=True applies it, a larger "
            "tolerance lets it through)"
        )


def check(before: Mapping[str, Score], after: Mapping[str, Score], tolerance: float) -> Verdict:
    """Whether the merged model (``after``) may replace the parent (``before``)."""
    parent, merged = figure(before), figure(after)
    mine, theirs = parent.value, merged.value
    if mine is None:
        passed = True
    elif theirs is None:
        passed = False
    else:
        passed = theirs <= mine + tolerance * abs(mine)
    return Verdict(parent, merged, tolerance, passed)


def scorer(evaluator: Evaluator) -> Callable[[nn.Module], float]:
    """``score(model)``: its figure on ``evaluator``'s targets, lower is better (``NaN`` when
    the evaluation was cancelled or gave none)."""

    def score(model: nn.Module) -> float:
        scores = evaluator.scores(model)
        value = None if scores is None else figure(scores).value
        return math.nan if value is None else value

    return score
