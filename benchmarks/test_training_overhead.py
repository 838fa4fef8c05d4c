"""What OnTheFly costs a training run, per step, against bare loops in the same run.

Four drivers on the same workload, interleaved round by round so machine noise hits all:

* (a) a hand-written PyTorch loop,
* (b) ``onthefly.Trainer`` with all callbacks, its session server running, one client watching,
* (c) a plain ``lightning.Trainer``,
* (d) ``lightning.Trainer`` + ``attach_lightning``, server running, one client watching.

And what bounds (b) and (d) from below: ``onthefly.Trainer`` with no session (its loop
alone), and two floors, (a) and (c) recording inline and with nothing else the values
OnTheFly records per step (the loss kept on its device, each group's learning rate, one
fused gradient norm, the per-sample losses; shipped every 32 steps in one copy, see
``_Measurements``). No recorder of those values costs less than its floor, so
``floor/plain`` plus the loop's own share is the least any design of (b) could reach on a
workload, ``lightning floor/lightning`` the least for (d).

Targets: (b)/(a) ≤ 1.10 and (d)/(c) ≤ 1.05, on an MLP 32-64-2 (4096x32 features, batch
128, Adam) and on a CNN of about 2M parameters, in wall time per step.

A shared machine's speed drifts by tens of percent within seconds, more than the differences
measured here. So each ratio is taken within a round, between runs that follow each other
(the drivers run in list order in even rounds and in reverse order in odd ones, so a steady
drift favours neither side), and the figure is the median of the rounds' ratios; the
milliseconds per step are medians over rounds. The MLP rounds run ``MLP_STEPS`` steps, long
enough for the background work that comes every few hundred steps (two hand-overs of the
per-sample history to its thread, the runtime sampler's samples) to be counted in its share.
The training process's CPU time per step (all its threads: the session server's included,
the client's process not) is recorded too: it is far less disturbed by other load on a
shared machine. Other load only ever slows a round, so each ratio is also given between the
drivers' fastest rounds (``fastest: …``, the estimate ``timeit`` recommends), a second figure
that a slow stretch moves less. The floors tell how far a run can be trusted: they do more
than the bare loops, so a floor's ratio below 1 means the run was noisier than the
differences it measures (and where the fastest rounds' floors are off too, neither figure
measures the code). Per-sample capture's own share is measured head to head: (b) and (d)
against the same runs with ``track_samples=False`` (the ``part:`` ratios). The host syncs
OnTheFly adds per step are counted in ``test_host_syncs.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import onthefly
from benchmarks.workloads import WORKLOADS, Workload, fit_native, lightning_trainer, make_loader
from onthefly.samples.history import HAND_OVER_ROWS

WARMUP = 10
MLP_STEPS = WARMUP + 2 * HAND_OVER_ROWS // 128
"""Two of the per-sample history's hand-overs to its thread in the timed steps of the MLPs
(batches of 128): the work that comes every few hundred steps is counted in its share. Its
Parquet writes, one per 2^18 rows (2048 of these steps; about 20 ms of Arrow's C++ code that
leaves the GIL free, 10 µs a step on this machine), fall outside."""
ROUNDS = {"mlp": 15, "wide-mlp": 9, "cnn": 5}


class _Measurements:
    """The values OnTheFly records per optimizer step, recorded the cheapest way: inline, with
    no hooks, names, indices or server; every 32 steps one stack and one host copy."""

    def __init__(self) -> None:
        self.rows: list[tuple[torch.Tensor, list[float], tuple[torch.Tensor, ...]]] = []
        self.samples: list[torch.Tensor] = []
        self.shipped: list[tuple[float, float]] = []
        self.norms: tuple[torch.Tensor, ...] = ()
        self.lrs: list[float] = []

    def forward(self, scores: torch.Tensor, targets: torch.Tensor) -> None:
        """After the forward pass: the per-sample losses of the batch."""
        self.samples.append(F.cross_entropy(scores.detach(), targets, reduction="none"))

    def before_step(self, optimizer: torch.optim.Optimizer) -> None:
        """Before ``optimizer.step()``: learning rates and one fused gradient norm."""
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        self.norms = tuple(torch._foreach_norm(grads))
        self.lrs = [group["lr"] for group in optimizer.param_groups]

    def step_end(self, loss: torch.Tensor) -> None:
        """After the step: keep the loss; ship every 32 steps."""
        rows = self.rows
        rows.append((loss.detach(), self.lrs, self.norms))
        if len(rows) == 32:
            losses = torch.stack([row[0] for row in rows]).tolist()
            parts = torch.stack([n for row in rows for n in row[2]]).view(len(rows), -1)
            norms = torch.linalg.vector_norm(parts, dim=1).tolist()
            torch.cat(self.samples).tolist()
            self.shipped.extend(zip(losses, norms, strict=True))
            self.rows, self.samples = [], []


class _Module(pl.LightningModule):
    def __init__(self, model: nn.Module, measurements: _Measurements | None = None) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = nn.CrossEntropyLoss()
        self.measurements = measurements

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        scores = self.model(x)
        if self.measurements is not None:
            self.measurements.forward(scores, y)
        return self.loss_fn(scores, y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)


WATCHER = """
import time
import onthefly
from onthefly.server.discovery import list_sessions
deadline = time.monotonic() + 60
while not list_sessions() and time.monotonic() < deadline:
    time.sleep(0.005)
with onthefly.connect() as client:
    for n, _ in enumerate(client.watch()):
        if n == 0:  # the snapshot: subscribed, the live stream follows
            print("watching", flush=True)
"""


STEP_HOOKS = (
    "on_train_batch_start",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
)
"""The hooks that fire at every training step."""


class _Watcher(pl.Callback):
    """A dashboard stand-in in its own process that watches the whole run.

    Its interpreter starts and subscribes before the first step (``on_train_start`` waits for
    it), so what the timed steps pay is watching, not the client's start-up on the same CPUs.
    A dashboard is no callback of the run: Lightning skips the per-step hooks set to ``None``
    here (it calls every callable hook of every callback, ~3 µs each with its profiler).
    """

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        for hook in STEP_HOOKS:
            setattr(self, hook, None)

    def on_train_start(self, trainer: Any, *args: Any) -> None:
        assert self.process is not None and self.process.stdout is not None
        line = self.process.stdout.readline()
        if line.strip() != "watching":
            raise RuntimeError(f"the watching client did not subscribe (it printed {line!r})")


@contextmanager
def _watching_client(watcher: _Watcher) -> Iterator[None]:
    command = [sys.executable, "-c", WATCHER]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as process:
        watcher.process = process
        try:
            yield
        finally:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass(frozen=True)
class PerStep:
    """Seconds per step: wall time, and the training process's CPU time (all its threads)."""

    wall: float
    cpu: float


class _StepClock(pl.Callback):
    """Time per step in the steady state: from the start of step WARMUP to the last end."""

    def __init__(self) -> None:
        self.start = self.end = (0.0, 0.0)
        self.steps = 0

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == WARMUP:
            self.start = (time.perf_counter(), time.process_time())

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        self.end = (time.perf_counter(), time.process_time())
        self.steps = trainer.global_step - WARMUP

    @property
    def per_step(self) -> PerStep:
        return _per_step(self.start, self.end, self.steps)


def _per_step(start: tuple[float, float], end: tuple[float, float], steps: int) -> PerStep:
    return PerStep((end[0] - start[0]) / steps, (end[1] - start[1]) / steps)


class _Measuring(pl.Callback):
    """Lightning's floor: the measurements in the two hooks that need them."""

    def __init__(self, measurements: _Measurements) -> None:
        self.measurements = measurements

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.measurements.before_step(optimizer)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.measurements.step_end(outputs["loss"])


def _plain(work: Workload, measured: bool = False) -> PerStep:
    torch.manual_seed(0)
    model = work.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    loader = make_loader(work)
    measurements = _Measurements() if measured else None
    steps = 0
    start = end = (0.0, 0.0)
    while steps < work.steps:
        for x, y in loader:
            if steps == WARMUP:
                start = (time.perf_counter(), time.process_time())
            opt.zero_grad()
            scores = model(x)
            loss = loss_fn(scores, y)
            if measurements is not None:
                measurements.forward(scores, y)
            loss.backward()
            if measurements is not None:
                measurements.before_step(opt)
            opt.step()
            if measurements is not None:
                measurements.step_end(loss)
            steps += 1
            end = (time.perf_counter(), time.process_time())
            if steps == work.steps:
                break
    return _per_step(start, end, work.steps - WARMUP)


def _native(work: Workload, session: bool = True, track_samples: bool = True) -> PerStep:
    torch.manual_seed(0)
    model = work.make_model()
    clock, watcher = _StepClock(), _Watcher()
    session_options = {"run_name": "native", "quiet": True, "track_samples": track_samples}
    options: dict[str, Any] = (
        {"callbacks": [clock, watcher], **session_options}
        if session
        else {"callbacks": [clock], "session": False}  # the loop alone
    )
    trainer = onthefly.Trainer(project="bench", max_steps=work.steps, progress_bar=False, **options)
    with _watching_client(watcher) if session else nullcontext():
        fit_native(trainer, model, work)
    return clock.per_step


def _lightning(
    work: Workload, attach: bool, measured: bool = False, track_samples: bool = True
) -> PerStep:
    torch.manual_seed(0)
    measurements = _Measurements() if measured else None
    module = _Module(work.make_model(), measurements)
    clock = _StepClock()
    measuring = [_Measuring(measurements)] if measurements is not None else []
    trainer = lightning_trainer([clock, *measuring], work.steps)
    if not attach:
        trainer.fit(module, train_dataloaders=make_loader(work))
        return clock.per_step
    onthefly.attach_lightning(
        trainer, project="bench", run_name="lightning", quiet=True, track_samples=track_samples
    )
    watcher = _Watcher()
    trainer.callbacks.append(watcher)  # type: ignore[attr-defined]
    with _watching_client(watcher):
        trainer.fit(module, train_dataloaders=make_loader(work))
    return clock.per_step


DRIVERS: dict[str, Callable[[Workload], PerStep]] = {
    "plain": _plain,
    "native": _native,
    "lightning": lambda work: _lightning(work, attach=False),
    "lightning+onthefly": lambda work: _lightning(work, attach=True),
    "native loop only": lambda work: _native(work, session=False),
    "plain floor": lambda work: _plain(work, measured=True),
    "lightning floor": lambda work: _lightning(work, attach=False, measured=True),
    "native, no per-sample capture": lambda work: _native(work, track_samples=False),
    "lightning+onthefly, no per-sample capture": lambda work: _lightning(
        work, attach=True, track_samples=False
    ),
}


RATIOS = {
    "native/plain": ("native", "plain"),
    "lightning+onthefly/lightning": ("lightning+onthefly", "lightning"),
    "floor: plain floor/plain": ("plain floor", "plain"),
    "floor: native loop only/plain": ("native loop only", "plain"),
    "floor: lightning floor/lightning": ("lightning floor", "lightning"),
    "part: per-sample capture, native": ("native", "native, no per-sample capture"),
    "part: per-sample capture, lightning": (
        "lightning+onthefly",
        "lightning+onthefly, no per-sample capture",
    ),
}
"""Each reported ratio: (measured, baseline). The ``part:`` ratios divide the targets' ratios:
what per-sample capture (on by default, ``track_samples=``) costs of the step, head to head."""


@dataclass(frozen=True)
class Measured:
    """Per driver the median time per step over rounds; per ratio the median of the rounds',
    and the ratio of the fastest rounds."""

    per_step: dict[str, PerStep]
    ratios: dict[str, float]
    cpu_ratios: dict[str, float]
    fastest_ratios: dict[str, float]


def _measure(work: Workload, rounds: int) -> Measured:
    """Every driver once per round, in alternating order (see the module docstring)."""
    times: dict[str, list[PerStep]] = {name: [] for name in DRIVERS}
    for number in range(rounds):
        names = list(DRIVERS) if number % 2 == 0 else list(reversed(DRIVERS))
        for name in names:
            times[name].append(DRIVERS[name](work))

    def ratio(pair: tuple[str, str], of: Callable[[PerStep], float]) -> float:
        measured, baseline = pair
        pairs = zip(times[measured], times[baseline], strict=True)
        return statistics.median(of(a) / of(b) for a, b in pairs)

    return Measured(
        per_step={
            name: PerStep(
                statistics.median(t.wall for t in values),
                statistics.median(t.cpu for t in values),
            )
            for name, values in times.items()
        },
        ratios={name: ratio(pair, lambda t: t.wall) for name, pair in RATIOS.items()},
        cpu_ratios={name: ratio(pair, lambda t: t.cpu) for name, pair in RATIOS.items()},
        fastest_ratios={
            name: min(t.wall for t in times[measured]) / min(t.wall for t in times[baseline])
            for name, (measured, baseline) in RATIOS.items()
        },
    )


def _timed(work: Workload) -> Workload:
    """The workload as the rounds run it: the MLPs for ``MLP_STEPS`` steps."""
    return work if work.name == "cnn" else replace(work, steps=max(work.steps, MLP_STEPS))


@pytest.mark.timeout(1800)  # the CNN's rounds take minutes on a slow 2-core machine
@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_training_overhead(benchmark: Any, work: Workload) -> None:
    torch.set_num_threads(1)
    for driver in DRIVERS.values():  # warm up imports, allocator and thread pools
        driver(replace(work, steps=WARMUP + 2))
    measured = benchmark.pedantic(
        _measure, args=(_timed(work), ROUNDS[work.name]), rounds=1, iterations=1
    )
    wall = {name: value.wall for name, value in measured.per_step.items()}
    cpu = {name: value.cpu for name, value in measured.per_step.items()}
    benchmark.extra_info.update(
        {f"ms_per_step[{name}]": value * 1e3 for name, value in wall.items()}
        | measured.ratios
        | {
            "added_us_per_step[native]": (wall["native"] - wall["plain"]) * 1e6,
            "added_us_per_step[lightning]": (wall["lightning+onthefly"] - wall["lightning"]) * 1e6,
            "rounds": ROUNDS[work.name],
        }
        | {f"cpu_ms_per_step[{name}]": value * 1e3 for name, value in cpu.items()}
        | {f"cpu: {name}": measured.cpu_ratios[name] for name in list(RATIOS)[:2]}
        | {f"fastest: {name}": value for name, value in measured.fastest_ratios.items()}
    )
