"""How often Python's garbage collector walks the young objects of the training thread, and
for how long, per step, with and without OnTheFly.

The collector passes over the young objects once 700 more container objects (tuples, lists,
tensors…) were made than freed; a pass walks every container still alive among them — in a
training step, the batch being collated as well. Objects that a recorder keeps alive for
hundreds of steps bring each pass sooner, so they cost the training thread time that no
timer around the recorder's own code shows. Counted on the seed MLP (``MLP_STEPS`` steps,
two hand-overs of the per-sample history) under the drivers of
``test_training_overhead.py``. A count of passes does not move with the machine's speed,
their time does; it moves a little with what the process did before (27 to 33 native in
separate runs of the same code).
"""

from __future__ import annotations

import gc
import threading
import time
from collections import Counter
from dataclasses import replace
from typing import Any

import torch

from benchmarks.test_training_overhead import DRIVERS, MLP_STEPS
from benchmarks.workloads import WORKLOADS

MEASURED = ("plain", "native", "lightning", "lightning+onthefly")


class _Passes:
    """The collector's passes on the calling thread: per generation, and their time."""

    def __init__(self) -> None:
        self.count: Counter[int] = Counter()
        self.seconds = 0.0
        self._thread = threading.get_ident()
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if threading.get_ident() != self._thread:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.count[info["generation"]] += 1
            self.seconds += time.perf_counter() - self._started


def passes(driver: str, steps: int) -> _Passes:
    """The passes on the training thread during a run of ``driver`` of ``steps`` steps."""
    work = replace(WORKLOADS[0], steps=steps)
    found = _Passes()
    gc.callbacks.append(found)
    try:
        DRIVERS[driver](work)
    finally:
        gc.callbacks.remove(found)
    return found


def test_gc_passes_per_step(benchmark: Any) -> None:
    torch.set_num_threads(1)
    for driver in MEASURED:  # imports, thread pools: not counted
        DRIVERS[driver](replace(WORKLOADS[0], steps=12))

    def each() -> dict[str, _Passes]:
        return {driver: passes(driver, MLP_STEPS) for driver in MEASURED}

    found = benchmark.pedantic(each, rounds=1, iterations=1)
    us = {driver: run.seconds / MLP_STEPS * 1e6 for driver, run in found.items()}
    for driver, run in found.items():
        benchmark.extra_info[f"passes_per_1000_steps[{driver}]"] = (
            sum(run.count.values()) * 1000 / MLP_STEPS
        )
        benchmark.extra_info[f"us_per_step[{driver}]"] = us[driver]
    benchmark.extra_info["table"] = {
        "columns": ["training thread, per 1000 steps", *MEASURED],
        "rows": [
            [f"passes over generation {generation}"]
            + [found[driver].count[generation] * 1000 / MLP_STEPS for driver in MEASURED]
            for generation in (0, 1, 2)
        ]
        + [["µs of passes per step", *(us[driver] for driver in MEASURED)]],
    }
