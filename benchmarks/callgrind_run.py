"""One run of a driver of the overhead benchmark, made to be counted by valgrind's callgrind.

Usage::

    valgrind --tool=callgrind ... python -m benchmarks.callgrind_run DRIVER STEPS DILATION

Runs ``DRIVER`` (a name of ``test_training_overhead.DRIVERS``) on the seed MLP for ``STEPS``
steps and prints ``{"s_per_step": ...}``. Under callgrind a step takes about a hundred times
as long as it does natively, so what OnTheFly does every so many seconds (hand the rows
over at least every 0.1 s, ship the per-sample values at least every 0.5 s, take a gradient
norm every 10 ms) would run at nearly every step and count as per-step work. So the
process's clocks (``time.perf_counter``, ``time.monotonic``, ``time.time``) are slowed
``DILATION`` times before anything reads them: the printed step time, read from the slowed
clock, says whether the clocks ran at the pace of a native step (about a millisecond).
Timeouts that threads wait for in C (``Event.wait``) keep the real pace: the background
threads wake more often per step than at full speed, so the figures are an upper bound of
the training thread's share of their work (a GIL hand-over now and then).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable


def dilate(factor: float) -> None:
    """Slow the process's clocks ``factor`` times, from now on."""
    for name in ("perf_counter", "monotonic", "time"):
        real: Callable[[], float] = getattr(time, name)
        origin = real()

        def slowed(real: Callable[[], float] = real, origin: float = origin) -> float:
            return origin + (real() - origin) / factor

        setattr(time, name, slowed)


def main(driver: str, steps: int, factor: float) -> None:
    dilate(factor)  # before any module reads a clock
    from dataclasses import replace

    import torch

    from benchmarks.test_training_overhead import DRIVERS
    from benchmarks.workloads import WORKLOADS

    torch.set_num_threads(1)
    per_step = DRIVERS[driver](replace(WORKLOADS[0], steps=steps))
    print(json.dumps({"s_per_step": per_step.wall}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
