"""The rules behind a run's alerts, as pure state machines fed with host values.

Each rule takes what the run already has on the host (the step values Telemetry ships in
batches, the step counter of the :class:`~onthefly.callbacks._runtime_sampler.StepClock`) and
answers with a :class:`Verdict` when an alert is raised or cleared, ``None`` otherwise. None
of them touches a tensor, so none adds a host sync.

* :class:`NonFinite`: a value is NaN or infinite (raised), then finite again (cleared).
* :class:`LossSpikes`: a loss far above the recent ones: above both ``factor`` times their
  median and the median plus ``sigmas`` robust standard deviations (1.4826 times the median
  absolute deviation). Cleared after ``quiet_steps`` steps without another.
* :class:`Stalls`: no step for ``factor`` times the usual step time, and at least
  ``min_seconds``, while the run is meant to be training. Cleared by the next step.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np


@dataclass(frozen=True)
class Verdict:
    """An alert to raise or clear, with its one-line message and the numbers behind it."""

    state: Literal["raised", "cleared"]
    message: str
    details: dict[str, Any] = field(default_factory=dict)


def _number(value: float) -> str:
    return f"{value:.4g}"


class NonFinite:
    """Raised at the first NaN or infinite value of a series, cleared at the next finite one.

    Args:
        what: the value's name in messages (``"training loss"``).
        hint: what to look at, appended to the message.

    Example:
        >>> rule = NonFinite("training loss", "lower the learning rate")
        >>> rule.observe(1, 0.5) is None
        True
        >>> rule.observe(2, float("nan")).state
        'raised'
    """

    def __init__(self, what: str, hint: str) -> None:
        self._what = what
        self._hint = hint
        self._raised = False
        self._last: tuple[int, float] | None = None

    def observe(self, step: int, value: float) -> Verdict | None:
        """Look at the value of ``step``."""
        finite = math.isfinite(value)
        if finite:
            self._last = (step, value)
        if finite == (not self._raised):
            return None
        self._raised = not finite
        if finite:
            return Verdict("cleared", f"the {self._what} is finite again at step {step}")
        shown = "NaN" if math.isnan(value) else ("+inf" if value > 0 else "-inf")
        before = ""
        details: dict[str, Any] = {"value": shown}
        if self._last is not None:
            previous_step, previous = self._last
            before = f" (it was {_number(previous)} at step {previous_step})"
            details.update(previous=previous, previous_step=previous_step)
        message = f"the {self._what} is {shown} at step {step}{before}: {self._hint}"
        return Verdict("raised", message, details)

    def observe_all(self, steps: list[int], values: list[float]) -> list[tuple[int, Verdict]]:
        """:meth:`observe` each ``(step, value)`` in order; the verdicts, with their step.

        A batch of finite values while nothing is raised, the usual case, costs a sum."""
        if values and not self._raised and math.isfinite(sum(values)):
            self._last = (steps[-1], values[-1])
            return []
        found = []
        for step, value in zip(steps, values, strict=True):
            verdict = self.observe(step, value)
            if verdict is not None:
                found.append((step, verdict))
        return found


class LossSpikes:
    """Flags a loss far above the recent ones (see the module docstring for the rule).

    Args:
        window: recent finite losses the median and deviation are taken over.
        warmup: losses seen before the first verdict.
        factor: a spike is at least this many times the median …
        sigmas: … and this many robust standard deviations above it.
        quiet_steps: steps without a spike that clear the alert.
        refresh: losses between two recomputations of the threshold (it moves slowly, and
            sorting the window at every step would cost the training thread for nothing).

    Example:
        >>> rule = LossSpikes(warmup=10)
        >>> [rule.observe(step, 1.0 + 0.01 * (step % 3)) for step in range(20)][-1] is None
        True
        >>> rule.observe(20, 50.0).state
        'raised'
    """

    def __init__(
        self,
        window: int = 200,
        warmup: int = 50,
        factor: float = 3.0,
        sigmas: float = 8.0,
        quiet_steps: int = 100,
        refresh: int = 16,
    ) -> None:
        self._losses: deque[float] = deque(maxlen=window)
        self._warmup = warmup
        self._factor = factor
        self._sigmas = sigmas
        self._quiet_steps = quiet_steps
        self._refresh = refresh
        self._until_refresh = 0
        self._threshold = math.inf
        self._median = math.nan
        self._last_spike: int | None = None

    def observe(self, step: int, loss: float) -> Verdict | None:
        """Look at the loss of ``step`` (non-finite losses are :class:`NonFinite`'s)."""
        if not math.isfinite(loss):
            return None
        verdict = None
        if len(self._losses) >= self._warmup:
            self._until_refresh -= 1
            if self._until_refresh <= 0:
                self._recompute()
            if loss > self._threshold:
                verdict = self._spike(step, loss)
            elif self._last_spike is not None and step - self._last_spike >= self._quiet_steps:
                self._last_spike = None
                verdict = Verdict(
                    "cleared", f"no loss spike for {self._quiet_steps} steps (step {step})"
                )
        self._losses.append(loss)
        return verdict

    def observe_all(self, steps: list[int], losses: list[float]) -> list[tuple[int, Verdict]]:
        """:meth:`observe` each ``(step, loss)`` in order; the verdicts, with their step.

        While no spike is pending, the losses up to the next refresh of the threshold are
        compared with it at once: a batch of them costs a few calls, not a few per loss.
        """
        verdicts: list[tuple[int, Verdict]] = []
        start, count = 0, len(losses)
        while start < count:
            if self._last_spike is None and len(self._losses) >= self._warmup:
                chunk = losses[start : start + max(self._until_refresh - 1, 0)]
                if chunk and math.isfinite(sum(chunk)) and max(chunk) <= self._threshold:
                    self._until_refresh -= len(chunk)
                    self._losses.extend(chunk)
                    start += len(chunk)
                    continue
            # The refresh, a spike or its clearing, a non-finite loss, the warmup: as observe.
            verdict = self.observe(steps[start], losses[start])
            if verdict is not None:
                verdicts.append((steps[start], verdict))
            start += 1
        return verdicts

    def _recompute(self) -> None:
        self._until_refresh = self._refresh
        median, deviation = _median_and_deviation(self._losses)
        self._median = median
        self._threshold = max(self._factor * median, median + self._sigmas * deviation)

    def _spike(self, step: int, loss: float) -> Verdict | None:
        first = self._last_spike is None
        self._last_spike = step
        if not first:
            return None  # one alert per burst of spikes
        median = self._median
        ratio = loss / median if median > 0 else math.inf
        times = f"{ratio:.1f}x" if math.isfinite(ratio) else "far above"
        message = (
            f"training loss {_number(loss)} at step {step} is {times} the median of the last "
            f"{len(self._losses)} steps ({_number(median)}): a bad batch, or a learning rate too "
            "high for this point of training"
        )
        details = {"value": loss, "median": median, "threshold": self._threshold}
        return Verdict("raised", message, details)


def _median_and_deviation(values: deque[float]) -> tuple[float, float]:
    """The median of ``values`` and their robust standard deviation (1.4826 times the median
    absolute deviation), as :func:`statistics.median` takes them, in a few NumPy calls: this
    runs on the training thread, and a Python ``abs`` per value cost ~14 µs a window."""
    ordered = np.fromiter(values, np.float64, len(values))
    ordered.sort()
    median = _middle(ordered)
    deviations = np.abs(ordered - median)
    deviations.sort()
    return median, 1.4826 * _middle(deviations)


def _middle(ordered: np.ndarray) -> float:
    half = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[half])
    # Python floats, as statistics.median adds them: two values near the float64 limit
    # give inf there, where NumPy's scalars would warn of the overflow.
    return (float(ordered[half - 1]) + float(ordered[half])) / 2


class Stalls:
    """Raised when the step counter stops moving while the run should be training.

    Fed about once a second from a background thread with the clock's step count; the usual
    step time is the median over the recent seconds in which steps happened.

    Args:
        factor: a stall lasts this many usual step times …
        min_seconds: … and at least this long.
        history: seconds of progress the usual step time is taken over.

    Example:
        >>> rule = Stalls(min_seconds=5)
        >>> [rule.tick(t, steps=10 * t, training=True) for t in range(5)][-1] is None
        True
        >>> rule.tick(11.0, steps=40, training=True).state
        'raised'
    """

    def __init__(self, factor: float = 10.0, min_seconds: float = 30.0, history: int = 60) -> None:
        self._factor = factor
        self._min_seconds = min_seconds
        self._intervals: deque[float] = deque(maxlen=history)
        self._steps: int | None = None
        self._since: float | None = None  # when the step counter last moved
        self._last_tick: float | None = None
        self._raised = False

    @property
    def limit(self) -> float:
        """Seconds without a step that make a stall, from the steps seen so far."""
        usual = statistics.median(self._intervals) if self._intervals else 0.0
        return max(self._factor * usual, self._min_seconds)

    def tick(self, now: float, steps: int, training: bool) -> Verdict | None:
        """Look at the step counter at ``now`` (monotonic seconds).

        Args:
            now: the time of this look.
            steps: training batches done so far.
            training: whether the run should be stepping now (not paused, evaluating or
                busy with a command); time outside training never counts.
        """
        moved = self._steps is not None and steps != self._steps
        if moved and self._last_tick is not None and training and not self._raised:
            self._intervals.append((now - self._last_tick) / max(1, steps - (self._steps or 0)))
        self._steps, self._last_tick = steps, now
        if moved:
            verdict = self._clear(now)
            self._since = now
            return verdict
        if not training:
            self._since = None  # the wait starts again at the next look while training
            return None
        if self._since is None:
            self._since = now
            return None
        waited = now - self._since
        if self._raised or waited < self.limit:
            return None
        self._raised = True
        usual = statistics.median(self._intervals) if self._intervals else None
        typical = f" (a step usually takes {usual:.3g} s)" if usual else ""
        message = (
            f"no training step for {waited:.0f} s{typical}: a data loader waiting on I/O or a "
            "dead worker, a deadlock, or a step far slower than the others"
        )
        return Verdict("raised", message, {"seconds": round(waited, 1), "usual_step_s": usual})

    def _clear(self, now: float) -> Verdict | None:
        if not self._raised:
            return None
        self._raised = False
        waited = now - (self._since or now)
        return Verdict(
            "cleared",
            f"training steps again after {waited:.0f} s without one",
            {"seconds": round(waited, 1)},
        )
