"""The check before a merge is applied: the held-out figure no worse than the parent's."""

from __future__ import annotations

import math

import pytest

from onthefly.forks.compare import Score
from onthefly.forks.gate import TIE_BREAK, check, figure


def _val(accuracy: float | None, loss: float | None) -> dict[str, Score]:
    return {"hard": Score(2.0, 0.1, 100), "val": Score(loss, accuracy, 50)}


def test_a_classifier_is_judged_on_its_validation_error_then_its_loss() -> None:
    judged = figure(_val(0.8, 0.5))
    assert (judged.target, judged.metric) == ("val", "error")
    assert judged.value == pytest.approx(0.2 + TIE_BREAK * 0.5)
    # A lower loss does not make up for more errors ...
    verdict = check(_val(0.8, 0.9), _val(0.78, 0.4), tolerance=0.0)
    assert not verdict.passed
    assert "validation error rate 0.22 is above the parent's 0.2" in verdict.reason()
    assert "force=True" in verdict.reason()
    # ... fewer errors pass whatever the loss; equal errors are ordered by the loss.
    assert check(_val(0.8, 0.4), _val(0.82, 0.9), 0.0).passed
    assert check(_val(0.8, 0.5), _val(0.8, 0.4), 0.0).passed
    tie = check(_val(0.8, 0.4), _val(0.8, 0.5), 0.0)
    assert not tie.passed and "(equal error, higher loss)" in tie.reason()


def test_a_tolerance_allows_a_relative_rise() -> None:
    assert check(_val(0.8, 0.5), _val(0.79, 0.5), 0.05).passed  # error 0.21 <= 0.2 * 1.05
    assert not check(_val(0.8, 0.5), _val(0.78, 0.5), 0.05).passed


def test_without_accuracy_the_loss_judges() -> None:
    assert figure(_val(None, 0.5)).metric == "loss"
    assert not check(_val(None, 0.5), _val(None, 0.52), 0.0).passed
    assert check(_val(None, 0.5), _val(None, 0.52), 0.05).passed


def test_without_validation_the_training_targets_judge() -> None:
    before = {"hard": Score(2.0, None, 100), "rest": Score(0.2, None, 100)}
    judged = figure(before)
    assert (judged.target, judged.metric, judged.loss) == ("train", "loss", pytest.approx(1.1))
    after = {"hard": Score(1.0, None, 100), "rest": Score(0.4, None, 100)}
    assert check(before, after, 0.0).passed  # 0.7 < 1.1


def test_a_merge_without_a_figure_fails() -> None:
    assert not check(_val(None, 0.5), _val(None, math.nan), 0.0).passed
    empty = {"val": Score(None, None, 50)}
    assert not check(_val(0.8, 0.5), empty, 0.0).passed
    assert "no finite validation error rate" in check(_val(0.8, 0.5), empty, 0.0).reason()
