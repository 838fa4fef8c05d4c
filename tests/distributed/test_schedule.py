"""The spacing of control rounds: cheap enough, prompt enough, the same on every rank."""

from __future__ import annotations

import pytest

from onthefly.distributed import schedule
from onthefly.distributed.schedule import Spacing, fixed_interval, next_interval


@pytest.mark.parametrize(
    ("round_s", "step_s", "expected"),
    [
        (0.0008, 0.003, 16),  # cost says 27, latency (50 ms) says 16
        (0.0001, 0.003, 4),  # a cheap round: 1 % of 3 ms is 30 us, so every 4th batch
        (0.0008, 0.06, 1),  # slow steps: a round after every step
        (0.0008, 0.0001, 256),  # tiny steps: capped
        (0.0, 0.003, 1),  # a free round: every step
    ],
)
def test_the_interval_keeps_control_cheap_unless_that_delays_commands(
    round_s: float, step_s: float, expected: int
) -> None:
    assert next_interval(round_s, step_s) == expected


def test_rounds_follow_every_batch_while_measuring_then_adapt() -> None:
    spacing = Spacing()
    assert spacing.interval() == 1
    for _ in range(schedule.WARMUP_ROUNDS):
        spacing.round_started(batches=1)
        spacing.measured(0.0008)
        spacing.round_ended()
    spacing.step_s = 0.003  # as measured on a real run
    assert spacing.interval() == 16
    assert Spacing(fixed=5).interval() == 5


def test_a_fixed_interval_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    assert fixed_interval() is None
    monkeypatch.setenv("ONTHEFLY_SYNC_EVERY", "3")
    assert fixed_interval() == 3
    monkeypatch.setenv("ONTHEFLY_SYNC_EVERY", "often")
    assert fixed_interval() is None
    assert "ONTHEFLY_SYNC_EVERY='often' is ignored: expected a positive integer" in caplog.text
