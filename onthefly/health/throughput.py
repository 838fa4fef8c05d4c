"""Throughput: where a training step's time goes — data wait, forward, backward, optimizer.

* **data wait** is observed on the run itself: the time between the end of one training batch
  and the start of the next (the loader fetching), averaged over the steps since the run
  started (pauses, tests and validation excluded). The loader is never touched by the check,
  so the data position cannot move;
* **forward / backward / optimizer** come from :data:`PROBE_STEPS` timed probe steps on the
  current batch after one warm-up (device synchronised between phases), all undone
  afterwards;
* **other** is the rest of the observed step time (hooks, logging, callbacks).

A data wait of at least :data:`DATA_BOUND` of the step cycle is a ``warning`` naming the
loader as the bottleneck (more ``num_workers``, ``pin_memory``, a cheaper ``__getitem__``);
otherwise the split is an ``info`` finding naming the largest phase.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from onthefly.health.findings import Finding, finding, rounded
from onthefly.health.preserve import preserved
from onthefly.health.probe import Probe

PROBE_STEPS = 3
DATA_BOUND = 0.5


@dataclass(frozen=True)
class ObservedTiming:
    """Totals measured on the run: steps, their compute time and the data wait between them."""

    steps: int = 0
    step_time_s: float = 0.0
    data_wait_s: float = 0.0


def check_throughput(probe: Probe, observed: ObservedTiming) -> list[Finding]:
    """Split the step time; see the module docstring.

    Args:
        probe: the run at a batch boundary.
        observed: the run's own step and data-wait totals.
    """
    phases = _probe_phases(probe)
    steps = observed.steps
    data_wait = observed.data_wait_s / steps if steps >= 2 else None
    step_time = observed.step_time_s / steps if steps else None
    compute = sum(phases.values())
    split = {"data_wait": data_wait, **phases}
    if step_time is not None:
        split["other"] = max(step_time - compute, 0.0)
    details = {f"{name}_ms": None if s is None else rounded(s * 1e3) for name, s in split.items()}
    details["observed_steps"] = steps
    known = {name: s for name, s in split.items() if s is not None}
    bottleneck = max(known, key=lambda name: known[name])
    if data_wait is not None:
        cycle = data_wait + (step_time if step_time is not None else compute)
        share = data_wait / cycle if cycle > 0 else 0.0
        details["data_wait_share"] = rounded(share)
        if share >= DATA_BOUND:
            return [
                finding(
                    "throughput",
                    "warning",
                    f"data loading is the bottleneck: {share:.0%} of each step waits for the "
                    f"loader ({data_wait * 1e3:.3g} ms of {cycle * 1e3:.3g} ms); try more "
                    "num_workers, pin_memory or a cheaper __getitem__",
                    bottleneck="data_wait",
                    **details,
                )
            ]
    text = ", ".join(f"{name} {s * 1e3:.3g} ms" for name, s in known.items())
    note = "" if data_wait is not None else " (data wait: too few steps observed yet)"
    return [
        finding(
            "throughput",
            "info",
            f"bottleneck: {bottleneck}; per step: {text}{note}",
            bottleneck=bottleneck,
            **details,
        )
    ]


def _probe_phases(probe: Probe) -> dict[str, float]:
    """Median seconds of forward, backward and optimizer over the timed probe steps."""
    timings: list[tuple[float, float, float]] = []
    with preserved(probe.model, probe.optimizers):
        for i in range(PROBE_STEPS + 1):
            probe.zero_grad()
            probe.synchronize()
            start = time.perf_counter()
            loss = probe.loss()
            probe.synchronize()
            forward = time.perf_counter()
            loss.backward()
            probe.synchronize()
            backward = time.perf_counter()
            probe.step()
            probe.synchronize()
            end = time.perf_counter()
            if i:  # the first one warms caches and allocators up
                timings.append((forward - start, backward - forward, end - backward))
    return {
        name: statistics.median(t[i] for t in timings)
        for i, name in enumerate(("forward", "backward", "optimizer"))
    }
