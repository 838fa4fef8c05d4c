"""The alert rules as state machines: when each raises, when it clears, what it says."""

from __future__ import annotations

import math
import random
import statistics
from collections import deque

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from onthefly.callbacks._alert_rules import LossSpikes, NonFinite, Stalls, _median_and_deviation


def test_non_finite_raises_once_then_clears_at_the_next_finite_value() -> None:
    rule = NonFinite("training loss", "look at the lr")
    assert rule.observe(1, 0.7) is None
    raised = rule.observe(2, math.nan)
    assert raised is not None and raised.state == "raised"
    assert raised.details == {"value": "NaN", "previous": 0.7, "previous_step": 1}
    assert "NaN at step 2" in raised.message and "look at the lr" in raised.message
    assert rule.observe(3, math.inf) is None  # still raised: no second alert
    cleared = rule.observe(4, 0.5)
    assert cleared is not None and cleared.state == "cleared"
    assert rule.observe(5, 0.4) is None
    again = rule.observe(6, -math.inf)
    assert again is not None and again.details["value"] == "-inf"


def noisy_losses(n: int, seed: int = 0) -> list[float]:
    """A decreasing training loss with minibatch noise and the odd hard batch."""
    rng = random.Random(seed)
    return [
        (2.0 * math.exp(-i / 300) + 0.05) * (1 + 0.3 * rng.random()) * (1.6 if i % 97 == 0 else 1)
        for i in range(n)
    ]


def test_no_spike_in_an_ordinary_noisy_run() -> None:
    rule = LossSpikes()
    assert [v for i, v in enumerate(noisy_losses(3000)) if rule.observe(i, v)] == []


def test_a_spike_is_raised_once_per_burst_and_clears_after_a_quiet_stretch() -> None:
    rule = LossSpikes(warmup=50, quiet_steps=100)
    losses = noisy_losses(400)
    verdicts = {}
    for step, loss in enumerate(losses):
        if step in (250, 252):
            loss *= 20  # a burst of two bad batches
        verdict = rule.observe(step, loss)
        if verdict is not None:
            verdicts[step] = verdict
    assert [(s, v.state) for s, v in verdicts.items()] == [(250, "raised"), (352, "cleared")]
    raised = verdicts[250]
    assert raised.details["value"] > raised.details["threshold"] > raised.details["median"]
    assert "step 250" in raised.message and "median of the last" in raised.message


def test_spikes_ignore_non_finite_losses_and_wait_for_their_warmup() -> None:
    rule = LossSpikes(warmup=10)
    assert all(rule.observe(step, 1.0) is None for step in range(9))
    assert rule.observe(9, 100.0) is None  # warm-up not over: nothing to compare with
    assert rule.observe(10, math.nan) is None


@given(st.lists(st.floats(0.01, 10.0), min_size=60, max_size=300), st.floats(1.0, 3.0))
def test_a_loss_within_the_recent_range_is_never_a_spike(losses: list[float], scale: float) -> None:
    rule = LossSpikes(warmup=50)
    for step, loss in enumerate(losses):
        rule.observe(step, loss)
    # At most the largest recent loss and at most 3x the median: below both parts of the rule.
    ceiling = min(max(losses[-200:]), 3.0 * sorted(losses[-200:])[len(losses[-200:]) // 2])
    assert rule.observe(len(losses), ceiling * min(scale, 1.0)) is None


@given(st.lists(st.floats(0.0, 1e6) | st.sampled_from([0.5, 1.0, 2.0]), min_size=1, max_size=250))
def test_the_spike_threshold_is_the_statistics_median_and_deviation(losses: list[float]) -> None:
    window = deque(losses, maxlen=200)
    median = statistics.median(window)
    deviation = 1.4826 * statistics.median([abs(v - median) for v in window])
    # The same floats as the statistics module's, odd and even windows, ties included.
    assert _median_and_deviation(window) == (median, deviation)


def test_a_stall_is_raised_after_several_usual_step_times_and_cleared_by_the_next_step() -> None:
    rule = Stalls(factor=10, min_seconds=2.0)
    steps = 0
    for second in range(10):  # 20 steps a second: a step takes 0.05 s
        assert rule.tick(float(second), steps, training=True) is None
        steps += 20
    assert rule.tick(10.0, steps, training=True) is None
    assert rule.limit == pytest.approx(2.0)  # 10 x 0.05 s is below the 2 s floor
    assert rule.tick(11.5, steps, training=True) is None
    raised = rule.tick(12.5, steps, training=True)
    assert raised is not None and raised.state == "raised"
    assert raised.details["seconds"] == pytest.approx(2.5)
    assert raised.details["usual_step_s"] == pytest.approx(0.05)
    assert rule.tick(13.5, steps, training=True) is None  # raised once
    cleared = rule.tick(14.0, steps + 1, training=True)
    assert cleared is not None and cleared.state == "cleared"
    assert "after 4 s" in cleared.message


def test_time_outside_training_never_counts_towards_a_stall() -> None:
    rule = Stalls(min_seconds=2.0)
    assert rule.tick(0.0, 5, training=True) is None
    for second in range(1, 30):  # paused for half a minute
        assert rule.tick(float(second), 5, training=False) is None
    assert rule.tick(30.5, 5, training=True) is None
    assert rule.tick(31.0, 5, training=True) is None  # only 1 s of training without a step
    assert rule.tick(33.0, 5, training=True) is not None


def test_the_usual_step_time_scales_the_limit() -> None:
    rule = Stalls(factor=10, min_seconds=1.0)
    for second in range(10):  # one step every 2 s
        rule.tick(float(2 * second), second, training=True)
    assert rule.limit == pytest.approx(20.0)


_SERIES = st.lists(
    st.one_of(
        st.floats(min_value=0.5, max_value=1.5),
        st.floats(min_value=5.0, max_value=50.0),  # spikes
        st.sampled_from([math.nan, math.inf, -math.inf, 1e308]),
    ),
    max_size=300,
)


@given(_SERIES, st.lists(st.integers(min_value=1, max_value=70), min_size=1, max_size=20))
@example([1.0] * 4 + [1e308] * 6 + [1.0], [1])  # a median of two 1e308: inf, not a warning
def test_observing_a_batch_says_what_observing_its_steps_one_by_one_says(
    values: list[float], sizes: list[int]
) -> None:
    def rules() -> tuple[NonFinite, LossSpikes]:
        return NonFinite("loss", "hint"), LossSpikes(warmup=10, quiet_steps=8, refresh=5)

    one_by_one, batched = rules(), rules()
    for alone, together in zip(one_by_one, batched, strict=True):
        expected = [(i, alone.observe(i, value)) for i, value in enumerate(values)]
        found, start, turn = [], 0, 0
        while start < len(values):  # the steps, in batches of the drawn sizes
            size = sizes[turn % len(sizes)]
            steps = list(range(start, min(start + size, len(values))))
            found += together.observe_all(steps, values[start : start + size])
            start, turn = start + size, turn + 1
        assert found == [(i, verdict) for i, verdict in expected if verdict is not None]
    spikes, batched_spikes = one_by_one[1], batched[1]
    assert list(batched_spikes._losses) == list(spikes._losses)  # and the same state after
    assert (batched_spikes._until_refresh, batched_spikes._threshold) == (
        spikes._until_refresh,
        spikes._threshold,
    )
