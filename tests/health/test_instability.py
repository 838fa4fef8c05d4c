"""The instability check over the shipped step values: spikes, NaN, AMP skips, learning rates."""

from __future__ import annotations

import math

from onthefly.health import AmpCounts, StepHistory, check_instability, problems
from onthefly.health.instability import StepRecord, spike_steps


def _records(losses: list[float], lr: float = 0.1) -> list[StepRecord]:
    return [StepRecord(i + 1, loss, 1.0, {"lr": lr}) for i, loss in enumerate(losses)]


def _decreasing(n: int = 60) -> list[float]:
    return [1.0 / (1 + 0.05 * i) + 0.02 * ((i * 7) % 5) for i in range(n)]


def test_a_smooth_run_has_no_problem() -> None:
    findings = check_instability(_records(_decreasing()), AmpCounts(60, 60))
    assert problems(findings) == []
    assert findings[-1].details == {"first_step": 1, "last_step": 60}


def test_a_loss_spike_is_found_against_the_rolling_median() -> None:
    losses = _decreasing()
    losses[40] = 5.0
    findings = problems(check_instability(_records(losses), AmpCounts()))
    assert len(findings) == 1
    assert findings[0].details["steps"] == [41]
    assert findings[0].details["largest"]["step"] == 41


def test_non_finite_steps_are_an_error() -> None:
    losses = [*_decreasing(20), math.nan, math.inf]
    findings = problems(check_instability(_records(losses), AmpCounts()))
    assert findings[0].severity == "error" and findings[0].details["steps"] == [21, 22]


def test_amp_skips_and_a_zero_learning_rate() -> None:
    findings = problems(check_instability(_records(_decreasing(), lr=0.0), AmpCounts(100, 80)))
    summaries = " | ".join(f.summary for f in findings)
    assert "learning rate is 0" in summaries
    assert "skipped 20 of 100" in summaries


def test_history_keeps_the_last_steps_and_round_trips() -> None:
    history = StepHistory(size=2)
    history.record_columns([1], {"loss": [1.0], "lr": [0.1]})
    # A batch of shipped steps: a value a step lacks is None.
    history.record_columns([2, 3], {"loss": [2.0, 3.0], "lr": [0.1, 0.1], "acc": [None, 0.5]})
    assert [(r.step, r.loss, r.lrs) for r in history.records()] == [
        (2, 2.0, {"lr": 0.1}),
        (3, 3.0, {"lr": 0.1}),
    ]
    copy = StepHistory()
    copy.load_state_dict(history.state_dict())
    assert copy.records() == history.records()


def test_spike_steps_needs_a_window_first() -> None:
    assert spike_steps([(1, 1.0), (2, 100.0)]) == []
