"""Instability: loss and gradient-norm spikes, non-finite steps, AMP skips, learning rates.

Reads the recent training history: the per-step values the run already ships to its
dashboards (``loss``, ``grad_norm``, ``lr``, ``lr/group1``, …), collected as host floats
when they are published, so the check adds no work to the training step. A value is a
**spike** when it exceeds the median of the :data:`WINDOW` steps before it by more than
:data:`SPIKE_Z` robust deviations (scaled median absolute deviation) and by at least
:data:`SPIKE_RATIO` times.

Findings:

* ``error``: steps whose loss or gradient norm is NaN or infinite;
* ``warning``: loss spikes, gradient-norm spikes, a learning rate of 0, optimizer steps
  skipped by the AMP gradient scaler (overflow) in more than :data:`AMP_SKIP_SHARE` of the
  steps;
* ``info``: a few skipped AMP steps (the scaler calibrating), learning-rate jumps of
  :data:`LR_JUMP` times or more between two steps, the number of steps examined.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from onthefly.health.findings import Finding, finding, rounded
from onthefly.protocol import Severity

WINDOW = 25
SPIKE_Z = 6.0
SPIKE_RATIO = 1.5
AMP_SKIP_SHARE = 0.05
LR_JUMP = 10.0
MIN_STEPS = 5


@dataclass(frozen=True)
class StepRecord:
    """One training step's shipped values."""

    step: int
    loss: float | None
    grad_norm: float | None
    lrs: dict[str, float] = field(default_factory=dict)


class StepHistory:
    """The last ``size`` training steps, fed from the values shipped to the dashboards.

    Example:
        >>> history = StepHistory(size=3)
        >>> history.record_columns([1, 2], {"loss": [0.5, 0.25], "lr": [0.1, 0.1]})
        >>> [r.loss for r in history.records()]
        [0.5, 0.25]
    """

    def __init__(self, size: int = 2000) -> None:
        # Columns are kept as shipped and read into StepRecords only when a check asks:
        # recording runs for every batch of steps the telemetry ships.
        self.size = size
        self._chunks: deque[tuple[Sequence[int], Mapping[str, Sequence[float | None]]]] = deque()
        self._kept = 0

    def record_columns(
        self, steps: Sequence[int], values: Mapping[str, Sequence[float | None]]
    ) -> None:
        """Keep a batch of training steps: ``values[name][i]`` is step ``steps[i]``'s value
        (``None``: it has none)."""
        if not steps:
            return
        self._chunks.append((steps, values))
        self._kept += len(steps)
        while self._kept - len(self._chunks[0][0]) >= self.size:
            self._kept -= len(self._chunks.popleft()[0])

    def records(self) -> list[StepRecord]:
        """The kept steps, oldest first."""
        out = [
            _step_record(step, {name: column[i] for name, column in values.items()})
            for steps, values in self._chunks
            for i, step in enumerate(steps)
        ]
        return out[-self.size :]

    def state_dict(self) -> dict[str, Any]:
        """The kept steps as plain lists (for exports)."""
        return {
            "steps": [[r.step, r.loss, r.grad_norm, r.lrs] for r in self.records()],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict` output."""
        self._chunks.clear()
        self._kept = 0
        for step, loss, norm, lrs in state.get("steps", []):
            values = {"loss": [loss], "grad_norm": [norm], **{k: [v] for k, v in lrs.items()}}
            self.record_columns([step], values)


def _step_record(step: int, values: Mapping[str, Any]) -> StepRecord:
    lrs = {k: float(v) for k, v in values.items() if k.startswith("lr") and v is not None}
    return StepRecord(int(step), _float(values.get("loss")), _float(values.get("grad_norm")), lrs)


@dataclass(frozen=True)
class AmpCounts:
    """Optimizer steps attempted (``on_before_optimizer_step``) and actually taken."""

    attempted: int = 0
    taken: int = 0


def check_instability(records: Sequence[StepRecord], amp: AmpCounts) -> list[Finding]:
    """Look for instabilities in ``records``; see the module docstring.

    Args:
        records: recent training steps, oldest first.
        amp: optimizer steps attempted and taken (their difference: AMP skips).
    """
    out: list[Finding] = []
    out += _non_finite(records)
    out += _spikes(records, "loss")
    out += _spikes(records, "grad_norm")
    out += _learning_rates(records)
    out += _amp(amp)
    first = records[0].step if records else None
    last = records[-1].step if records else None
    note = "" if len(records) >= MIN_STEPS else f" (too few to judge: expected {MIN_STEPS}+)"
    out.append(
        finding(
            "instability",
            "info",
            f"examined {len(records)} step(s){note}",
            first_step=first,
            last_step=last,
        )
    )
    return out


def _non_finite(records: Sequence[StepRecord]) -> list[Finding]:
    bad = [
        r.step
        for r in records
        if any(v is not None and not math.isfinite(v) for v in (r.loss, r.grad_norm))
    ]
    if not bad:
        return []
    return [
        finding(
            "instability",
            "error",
            f"{len(bad)} step(s) with a NaN or infinite loss or gradient norm, first at step "
            f"{bad[0]}",
            steps=bad[:100],
        )
    ]


def spike_steps(points: Sequence[tuple[int, float]]) -> list[tuple[int, float, float]]:
    """``(step, value, rolling median)`` of each spike among ``(step, value)`` points.

    Example:
        >>> points = [(s, 1.0 + 0.01 * (s % 3)) for s in range(30)] + [(30, 9.0)]
        >>> [step for step, _, _ in spike_steps(points)]
        [30]
    """
    found = []
    window: deque[float] = deque(maxlen=WINDOW)
    for step, value in points:
        if len(window) >= WINDOW // 2 and math.isfinite(value):
            median = statistics.median(window)
            deviation = 1.4826 * statistics.median(abs(v - median) for v in window)
            scale = max(deviation, 1e-3 * abs(median), 1e-12)
            if value > median + SPIKE_Z * scale and value > SPIKE_RATIO * median:
                found.append((step, value, median))
        if math.isfinite(value):
            window.append(value)
    return found


def _spikes(records: Sequence[StepRecord], name: str) -> list[Finding]:
    points = [(r.step, v) for r in records if (v := getattr(r, name)) is not None]
    spikes = spike_steps(points)
    if not spikes:
        return []
    step, value, median = max(spikes, key=lambda s: s[1] / max(s[2], 1e-12))
    label = "loss" if name == "loss" else "gradient-norm"
    return [
        finding(
            "instability",
            "warning",
            f"{len(spikes)} {label} spike(s); largest at step {step}: {value:.4g} against a "
            f"rolling median of {median:.4g}",
            metric=name,
            steps=[s for s, _, _ in spikes][:100],
            largest={"step": step, "value": rounded(value), "median": rounded(median)},
        )
    ]


def _learning_rates(records: Sequence[StepRecord]) -> list[Finding]:
    if not records:
        return []
    out = []
    zero = sorted(name for name, lr in records[-1].lrs.items() if lr == 0)
    if zero:
        out.append(
            finding(
                "instability",
                "warning",
                f"the learning rate is 0 ({', '.join(zero)}): those parameters do not train",
                metrics=zero,
            )
        )
    jumps = [
        (now.step, name, before.lrs[name], lr)
        for before, now in itertools.pairwise(records)
        for name, lr in now.lrs.items()
        if before.lrs.get(name, 0) > 0
        and lr > 0
        and max(lr / before.lrs[name], before.lrs[name] / lr) >= LR_JUMP
    ]
    if jumps:
        step, name, old, new = jumps[-1]
        out.append(
            finding(
                "instability",
                "info",
                f"{len(jumps)} learning-rate jump(s) of {LR_JUMP:g}x or more; last at step "
                f"{step}: {name} {old:.3g} -> {new:.3g}",
                jumps=[{"step": s, "metric": n, "old": o, "new": w} for s, n, o, w in jumps[-20:]],
            )
        )
    return out


def _amp(amp: AmpCounts) -> list[Finding]:
    skipped = amp.attempted - amp.taken
    if skipped <= 0:
        return []
    share = skipped / max(amp.attempted, 1)
    severity: Severity = "warning" if share > AMP_SKIP_SHARE else "info"
    return [
        finding(
            "instability",
            severity,
            f"the AMP gradient scaler skipped {skipped} of {amp.attempted} optimizer steps "
            f"({share:.1%}) on inf/NaN gradients",
            skipped=skipped,
            attempted=amp.attempted,
        )
    ]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
