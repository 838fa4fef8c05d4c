"""How much Python OnTheFly runs on the training thread per step: calls, counted by module.

Time per step on a shared machine moves by tens of percent from one run to the next, more
than a change of a few calls makes; a count of calls does not move. So this benchmark counts,
with :func:`sys.setprofile` on the training thread only, every Python function call and
every call into C made by OnTheFly's code in the steady state (after ``WARMUP`` steps) of the
seed MLP under both drivers, per step, by the OnTheFly module the code is in. A call counts
where the code runs: a Python function of ``onthefly/`` (a generator's resume included),
or a C function (``len``, a tensor method, ``dict.get``…) called from such code. What the
called torch or Lightning code does in turn is not counted: that is the user's or the
trainer's own work, the same with or without OnTheFly.

In a training step, where little of the interpreter's code is still in the CPU's caches,
each call costs about a microsecond (``test_step_profile``): the count is the step's cost
that OnTheFly can cut, without the noise.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import lightning.pytorch as pl
import torch

import onthefly
from benchmarks.test_training_overhead import WARMUP, _Module, _Watcher, _watching_client
from benchmarks.workloads import WORKLOADS, Workload, fit_native, lightning_trainer, make_loader

PACKAGE = str(Path(onthefly.__file__).resolve().parent) + "/"
STEPS = 400


class CallCounter(pl.Callback):
    """Counts the calls of OnTheFly's code on the training thread, from the start of step
    ``WARMUP`` to the end of step ``last`` (the end of the run's work is left out)."""

    def __init__(self, last: int) -> None:
        self.calls: Counter[str] = Counter()
        self.steps = last - WARMUP
        self._last = last

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == WARMUP:
            sys.setprofile(self._count)  # this thread only

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self._last:
            sys.setprofile(None)

    def on_exception(self, *args: Any) -> None:
        sys.setprofile(None)

    def _count(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" or event == "c_call":  # the frame: the callee, or the C call's caller
            path = frame.f_code.co_filename
            if path.startswith(PACKAGE):
                self.calls[path[len(PACKAGE) :]] += 1


def count(driver: str, work: Workload) -> tuple[Counter[str], int]:
    """The calls of OnTheFly's code per module, and the steps counted, under ``driver``."""
    torch.manual_seed(0)
    counter, watcher = CallCounter(work.steps), _Watcher()
    if driver == "native":
        model = work.make_model()
        trainer: Any = onthefly.Trainer(
            project="bench", run_name="calls", max_steps=work.steps, progress_bar=False,
            callbacks=[counter, watcher], quiet=True,
        )  # fmt: skip
        with _watching_client(watcher):
            fit_native(trainer, model, work)
    else:
        trainer = lightning_trainer([counter], work.steps)
        onthefly.attach_lightning(trainer, project="bench", run_name="calls", quiet=True)
        trainer.callbacks.append(watcher)
        with _watching_client(watcher):
            trainer.fit(_Module(work.make_model()), train_dataloaders=make_loader(work))
    return counter.calls, counter.steps


DRIVERS = ("native", "lightning")


def test_calls_per_step(benchmark: Any) -> None:
    """OnTheFly's calls per step on the training thread, by module, under both drivers."""
    torch.set_num_threads(1)
    work = replace(WORKLOADS[0], steps=STEPS)

    def both() -> dict[str, dict[str, float]]:
        per_step: dict[str, dict[str, float]] = {}
        for driver in DRIVERS:
            calls, steps = count(driver, work)
            per_step[driver] = {module: n / steps for module, n in calls.items()}
        return per_step

    found = benchmark.pedantic(both, rounds=1, iterations=1)
    for driver in DRIVERS:
        benchmark.extra_info[f"calls_per_step[{driver}]"] = sum(found[driver].values())
    modules = sorted(
        {module for calls in found.values() for module in calls},
        key=lambda module: -max(found[driver].get(module, 0.0) for driver in DRIVERS),
    )
    benchmark.extra_info["table"] = {
        "columns": ["calls per step", *DRIVERS],
        "rows": [
            [f"`{module}`", *(found[driver].get(module) for driver in DRIVERS)]
            for module in modules
        ],
    }
