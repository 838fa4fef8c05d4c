"""Where OnTheFly's per-step time goes on the training thread, part by part, with timers.

Runs the seed MLP (benchmarks/workloads.py) under both drivers with a watching client, times
the per-step hooks of :class:`onthefly.OnTheFly` (its recorder's) and what they call of the
other parts (the rows handed over to Telemetry and the sample tracker, the shipped steps'
observers, the boundary hooks when something waits), the hook dispatch around them, the
per-sample capture inside the training step and the data-position tracker around the
loader, and reads the CPU time of the process's other threads (the session server, the
runtime sampler, the per-sample history: they compete with the training thread for the GIL
and the cores). Each
figure is microseconds per optimizer step, in the steady state (after ``WARMUP`` steps), and
each timer counts its own time only (a part's hook inside the optimizer's step is taken out
of the step's figure).

The user's own work (``user: fetch``, ``forward``, ``loss``, ``backward``, ``optimizer
step``) is timed too, in the same runs and in runs of the same driver without OnTheFly,
side by side: what OnTheFly costs a step is its own timed work, plus what the user's work
is slowed by (the code OnTheFly runs between the user's takes its place in the CPU's
caches; its threads take the GIL).

Timers add ~0.2 µs per timed call, so the parts sum to slightly more than what they cost
untimed; the step time itself is taken without them, by the ratio benchmark
(``test_training_overhead``).

``make bench`` writes the table into benchmarks/RESULTS.md; ``python -m
benchmarks.test_step_profile [native|lightning]`` prints the figures as JSON.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import dataloader

import onthefly
from benchmarks.test_training_overhead import (
    STEP_HOOKS,
    WARMUP,
    _Module,
    _Watcher,
    _watching_client,
)
from benchmarks.workloads import WORKLOADS, Workload, fit_native, lightning_trainer, make_loader
from onthefly.callbacks.onthefly import OnTheFly
from onthefly.native import hooks as native_hooks
from onthefly.native.hooks import implementation
from onthefly.samples import buffer, slot
from onthefly.sessions.data_position import TrackedIterator

DRIVERS = ("native", "lightning")
ROUNDS = 3
"""Runs of each column; the table gives their medians."""


class Timers:
    """Accumulated seconds per label, only inside the timed window and on the training thread.

    Each label gets its own time only: a timed call inside another (a part's hook inside the
    optimizer's step, the fetch inside the data-position tracker) is taken out of the outer
    one's figure.
    """

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.active = False
        self.thread = threading.get_ident()
        self._nested = [0.0]  # per open timed call, the time of the timed calls inside it

    def wrap(self, label: str, function: Callable[..., Any]) -> Callable[..., Any]:
        seconds, clock, nested = self.seconds, time.perf_counter, self._nested

        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.active or threading.get_ident() != self.thread:
                return function(*args, **kwargs)
            nested.append(0.0)
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                spent = clock() - start
                seconds[label] += spent - nested.pop()
                nested[-1] += spent

        return timed


class _Window(pl.Callback):
    """Opens the timers at step ``WARMUP`` and reads the other threads' CPU time."""

    def __init__(self, timers: Timers) -> None:
        self.timers = timers
        self.steps = 0
        self.start = 0.0
        self.wall = 0.0
        self.threads_before: dict[int, float] = {}
        self.threads: dict[str, float] = defaultdict(float)

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == WARMUP and not self.timers.active:
            self.timers.active = True
            self.threads_before = _thread_cpu()
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if self.timers.active:
            self.steps = trainer.global_step - WARMUP
            self.wall = time.perf_counter() - self.start

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.timers.active = False
        after, main = _thread_cpu(), threading.main_thread().native_id
        names = {thread.native_id: thread.name for thread in threading.enumerate()}
        for tid, cpu in after.items():
            if tid != main:
                name = _thread_kind(names.get(tid, "ended"))
                self.threads[name] += cpu - self.threads_before.get(tid, 0.0)


def _thread_cpu() -> dict[int, float]:
    """CPU seconds of each thread of this process (Linux: /proc/self/task)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        found[int(tid)] = (int(fields[11]) + int(fields[12])) / ticks
    return found


def _thread_kind(name: str) -> str:
    return re.sub(r"[-_ ]?\d+$", "", re.sub(r" \(.*\)$", "", name))


def _time_parts(callback: OnTheFly, timers: Timers) -> None:
    """What each part does at a step, timed under the part's class name: the recorder's
    hooks (the only per-step hooks of the bundle), and what they call of the other parts
    (the readers of the rows it hands over, the boundary hooks when something waits, the
    observers of the shipped steps)."""
    for part in callback.parts:
        for hook in STEP_HOOKS:
            method = implementation(part, hook)
            if method is not None:
                setattr(part, hook, timers.wrap(type(part).__name__, method))
    callback.parts = callback.parts  # rebuild the dispatch tables from the timed methods
    recorder = callback.recorder
    for calls in (
        recorder.readers,
        recorder.boundary_start,
        recorder.boundary_end,
        callback.telemetry.step_observers,
    ):
        calls[:] = [timers.wrap(_owner(call), call) for call in calls]


def _owner(method: Callable[..., Any]) -> str:
    """The name of the class of the part a bound method belongs to."""
    return type(getattr(method, "__self__", method)).__name__


USER_WORK: tuple[tuple[Any, str, str], ...] = (
    (dataloader._BaseDataLoaderIter, "__next__", "fetch"),
    (nn.Sequential, "forward", "forward"),
    (nn.CrossEntropyLoss, "forward", "loss"),
    (torch.Tensor, "backward", "backward"),
    (torch.optim.Adam, "step", "optimizer step"),
)
"""The user's own work in a step, timed with and without OnTheFly (labelled ``user: …``)."""

INTERNALS: tuple[tuple[Any, str, str], ...] = (
    (slot.Slot, "report", "per-sample capture (in the step)"),
    (buffer._Transfer, "chunk", "SampleTracker"),  # a shipment read on the host
    (TrackedIterator, "__next__", "data position"),
    (native_hooks.Hooks, "call", "hook dispatch"),
)
"""OnTheFly's own work on the training thread outside the parts' hooks (a shipment of
per-sample values is the tracker's: read once per 64 batches, at a hand-over)."""


@contextmanager
def _timed(timers: Timers, patches: list[tuple[Any, str, str]]) -> Iterator[None]:
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    try:
        for owner, name, label in patches:
            setattr(owner, name, timers.wrap(label, getattr(owner, name)))
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def profile(driver: str, work: Workload, attached: bool = True) -> dict[str, float]:
    """Microseconds per step of each part under ``driver`` (``native`` or ``lightning``);
    ``attached=False``: the same run without OnTheFly (the user's work only)."""
    torch.manual_seed(0)
    timers = Timers()
    window, watcher = _Window(timers), _Watcher()
    if driver == "native":
        model = work.make_model()
        session: dict[str, Any] = {"run_name": "profile", "quiet": True}
        trainer: Any = onthefly.Trainer(
            project="bench",
            max_steps=work.steps,
            progress_bar=False,
            callbacks=[window, watcher] if attached else [window],
            **(session if attached else {"session": False}),
        )
        umbrella = trainer.callbacks[0] if attached else None

        def fit() -> None:
            fit_native(trainer, model, work)
    else:
        module = _Module(work.make_model())
        trainer = lightning_trainer([window], work.steps)
        umbrella = None
        if attached:
            umbrella = onthefly.attach_lightning(
                trainer, project="bench", run_name="profile", quiet=True
            )
            trainer.callbacks.append(watcher)

        def fit() -> None:
            trainer.fit(module, train_dataloaders=make_loader(work))

    patches: list[tuple[Any, str, str]] = [
        (owner, name, f"user: {label}") for owner, name, label in USER_WORK
    ]
    if umbrella is not None:
        _time_parts(umbrella, timers)
        patches += INTERNALS
    with _timed(timers, patches), _watching_client(watcher) if attached else nullcontext():
        fit()
    per_step = {label: s / window.steps * 1e6 for label, s in timers.seconds.items()}
    figures = {f"us[{label}]": value for label, value in sorted(per_step.items())}
    user = sum(v for label, v in per_step.items() if label.startswith("user: "))
    figures["us[user: all timed]"] = user
    if umbrella is not None:
        parts = sum(per_step.get(type(p).__name__, 0.0) for p in umbrella.parts)
        figures["us[parts' hooks]"] = parts
        internals = sum(per_step.get(label, 0.0) for _, _, label in INTERNALS)
        figures["us[OnTheFly, all timed]"] = parts + internals
    figures["us[other threads' CPU]"] = sum(window.threads.values()) / window.steps * 1e6
    for name, seconds in window.threads.items():
        figures[f"us[thread {name}]"] = seconds / window.steps * 1e6
    figures["us[step, timed]"] = window.wall / window.steps * 1e6
    return figures


def profiles(work: Workload, rounds: int = ROUNDS) -> dict[str, dict[str, float]]:
    """Each column's figures: the median of ``rounds`` runs, the runs of a driver with and
    without OnTheFly alternating (this machine's speed drifts by tens of percent in minutes:
    only runs side by side compare)."""
    runs: dict[str, list[dict[str, float]]] = defaultdict(list)
    for round_ in range(rounds):
        for driver in DRIVERS:
            order = (True, False) if round_ % 2 == 0 else (False, True)
            for attached in order:
                runs[_column(driver, attached)].append(profile(driver, work, attached))
    return {
        column: {
            label: statistics.median(run[label] for run in found if label in run)
            for label in {label for run in found for label in run}
        }
        for column, found in runs.items()
    }


def _column(driver: str, attached: bool) -> str:
    return driver if attached else f"{driver}, no OnTheFly"


def test_step_profile(benchmark: Any) -> None:
    """The per-part table of both drivers on the seed MLP (3,000 steps a run)."""
    torch.set_num_threads(1)
    work = replace(WORKLOADS[0], steps=3000)
    results = benchmark.pedantic(lambda: profiles(work), rounds=1, iterations=1)
    columns = [_column(driver, attached) for driver in DRIVERS for attached in (True, False)]
    labels = sorted({label for figures in results.values() for label in figures})
    benchmark.extra_info["table"] = {
        "columns": ["µs per step", *columns],
        "rows": [
            [label[3:-1], *(results[column].get(label) for column in columns)] for label in labels
        ],
    }


def main(drivers: list[str]) -> None:
    torch.set_num_threads(1)
    work = replace(WORKLOADS[0], steps=3000)
    figures = {
        _column(driver, attached): profile(driver, work, attached)
        for driver in drivers
        for attached in (True, False)
    }
    json.dump(figures, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(sys.argv[1:] or list(DRIVERS))
