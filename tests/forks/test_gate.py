"""The check before a merge is applied: held-out loss no worse than the parent's."""

from __future__ import annotations

import math

import pytest

from onthefly.forks.compare import Score
from onthefly.forks.gate import check, held_out_loss


def _scores(val: float | None = None, **train: float) -> dict[str, Score]:
    scores = {name: Score(loss, None, 100) for name, loss in train.items()}
    if val is not None:
        scores["val"] = Score(val, 0.5, 50)
    return scores


def test_a_merge_worse_on_validation_fails_and_says_why() -> None:
    verdict = check(_scores(0.5, hard=2.0), _scores(0.52, hard=1.0), tolerance=0.0)
    assert not verdict.passed and verdict.target == "val"
    assert (verdict.parent, verdict.merged) == (0.5, 0.52)
    assert "validation loss 0.52 is above the parent's 0.5" in verdict.reason()
    assert "force=True" in verdict.reason()


def test_equal_or_better_passes_and_a_tolerance_allows_a_relative_rise() -> None:
    assert check(_scores(0.5), _scores(0.5), 0.0).passed
    assert check(_scores(0.5), _scores(0.4), 0.0).passed
    assert check(_scores(0.5), _scores(0.52), 0.05).passed
    assert not check(_scores(0.5), _scores(0.53), 0.05).passed


def test_without_validation_the_training_targets_judge() -> None:
    before = _scores(hard=2.0, rest=0.2)
    assert held_out_loss(before) == ("train", pytest.approx(1.1))
    verdict = check(before, _scores(hard=1.0, rest=0.4), 0.0)
    assert verdict.target == "train" and verdict.passed  # 0.7 < 1.1


def test_a_merge_without_a_finite_loss_fails() -> None:
    assert not check(_scores(0.5), _scores(math.nan), 0.0).passed
    assert not check(_scores(0.5), {"val": Score(None, None, 50)}, 0.0).passed
    assert (
        "no finite validation loss"
        in check(_scores(0.5), {"val": Score(None, None, 50)}, 0.0).reason()
    )
