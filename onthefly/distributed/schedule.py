"""How many batches pass between two control rounds: few enough to be prompt, enough to be cheap.

A control round costs one small broadcast (0.1 to 1 ms over gloo on a loaded CPU
machine): every step would cost a fast model a third of its step time. Rank 0 therefore
measures the round's cost and the step time (moving averages) and spaces the rounds so
that control costs at most :data:`BUDGET` of the training time, unless that would delay a
command by more than :data:`MAX_LATENCY_S`; then the latency bound wins. Steps of 50 ms
or more get a round after every step. The interval is part of each round's broadcast, so
every rank holds the next round after the same batch.

``ONTHEFLY_SYNC_EVERY=N`` fixes the interval at ``N`` batches instead.
"""

from __future__ import annotations

import logging
import math
import os
import time

log = logging.getLogger(__name__)

BUDGET = 0.01
"""Largest share of the training time the control rounds may take."""

MAX_LATENCY_S = 0.05
"""Longest a command waits for the next round because of the spacing (at least one batch)."""

MAX_INTERVAL = 256
"""Most batches between two rounds."""

WARMUP_ROUNDS = 4
"""Rounds held after every batch at the start, to measure."""

FIXED_ENV = "ONTHEFLY_SYNC_EVERY"

_SMOOTHING = 0.2


def next_interval(
    round_s: float,
    step_s: float,
    budget: float = BUDGET,
    max_latency_s: float = MAX_LATENCY_S,
    most: int = MAX_INTERVAL,
) -> int:
    """Batches until the next round, given a round's cost and a batch's time (seconds).

    Example:
        >>> next_interval(round_s=0.0008, step_s=0.003)  # 3 ms steps: a round every 16
        16
        >>> next_interval(round_s=0.0008, step_s=0.06)  # slow steps: every step
        1
    """
    if step_s <= 0:
        return 1
    by_cost = math.ceil(round_s / (budget * step_s))
    by_latency = max(1, math.floor(max_latency_s / step_s))
    return max(1, min(by_cost, by_latency, most))


def fixed_interval() -> int | None:
    """``ONTHEFLY_SYNC_EVERY`` as a positive int; ``None`` when unset (invalid: warned)."""
    raw = os.environ.get(FIXED_ENV, "").strip()
    if not raw:
        return None
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    log.warning("%s=%r is ignored: expected a positive integer", FIXED_ENV, raw)
    return None


class Spacing:
    """Measures rounds and batches on a rank, and proposes the next interval (rank 0's wins).

    Args:
        fixed: a fixed interval (``ONTHEFLY_SYNC_EVERY``), or ``None`` to adapt.
    """

    def __init__(self, fixed: int | None = None) -> None:
        self.fixed = fixed
        self.round_s: float | None = None
        self.step_s: float | None = None
        self._rounds = 0
        self._last_end = time.monotonic()

    def round_started(self, batches: int) -> None:
        """A round starts after ``batches`` batches of training since the previous one."""
        if batches > 0:
            per_batch = (time.monotonic() - self._last_end) / batches
            self.step_s = _smoothed(self.step_s, per_batch)

    def measured(self, seconds: float) -> None:
        """The broadcast of a plain round (no command, not holding) took ``seconds``."""
        self.round_s = _smoothed(self.round_s, seconds)
        self._rounds += 1

    def round_ended(self) -> None:
        """The round is over; training resumes now."""
        self._last_end = time.monotonic()

    def interval(self) -> int:
        """Batches until the next round."""
        if self.fixed is not None:
            return self.fixed
        if self._rounds < WARMUP_ROUNDS or self.round_s is None or self.step_s is None:
            return 1
        return next_interval(self.round_s, self.step_s)


def _smoothed(average: float | None, sample: float) -> float:
    return sample if average is None else average + _SMOOTHING * (sample - average)
