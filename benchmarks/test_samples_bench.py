"""Per-sample loss: what capture costs a step, scan throughput, and a 1M-row export.

* capture overhead: ``onthefly.Trainer`` with the per-sample tracker on vs off (everything
  else equal), interleaved round by round, on the MLP and the ~2M-parameter CNN workloads of
  ``test_training_overhead.py``. Target: <= 1.02.
* capture cost per path: the same, for a loss module (its tap) and for an inline
  ``F.cross_entropy`` (the step's TorchFunctionMode), both in the same custom step.
* scan throughput: a scan of the MLP/CNN data vs a plain evaluation loop (eval, no_grad,
  forward + loss) over the same loader, same run. Target: ≥ 0.9.
* export: 1,000,000 selected rows to Parquet. Target: ≤ 1 s.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from benchmarks.workloads import WORKLOADS, Workload, make_loader
from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks.sample_tracker import SampleTracker
from onthefly.samples import export
from onthefly.samples.loss_spec import describe_loss
from onthefly.samples.scan import run_scan
from onthefly.samples.slot import Slot
from onthefly.samples.store import SampleView

ROUNDS = 7
WARMUP = 10


class _Clock(pl.Callback):
    """Wall seconds per step from the start of step WARMUP to the last step's end."""

    def __init__(self) -> None:
        self.start = self.end = 0.0
        self.steps = 0

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == WARMUP:
            self.start = time.perf_counter()

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        self.end = time.perf_counter()
        self.steps = trainer.global_step - WARMUP


def _steps(work: Workload, track: bool, *also: pl.Callback) -> float:
    torch.manual_seed(0)
    model = work.make_model()
    clock = _Clock()
    trainer = onthefly.Trainer(
        project="bench", max_steps=work.steps, progress_bar=False, callbacks=[clock, *also],
        quiet=True, port=0, track_samples=track,
    )  # fmt: skip
    trainer.fit(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=make_loader(work),
    )
    return (clock.end - clock.start) / clock.steps


def _capture(work: Workload) -> dict[str, float]:
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(ROUNDS):
        for track in (False, True):
            times[track].append(_steps(work, track))
    return {"off": statistics.median(times[False]), "on": statistics.median(times[True])}


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_capture_overhead(benchmark: Any, work: Workload) -> None:
    torch.set_num_threads(1)
    short = replace(work, steps=WARMUP + 2)
    _steps(short, True)  # warm up imports and allocator
    medians = benchmark.pedantic(_capture, args=(work,), rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            "ms_per_step[tracking off]": medians["off"] * 1e3,
            "ms_per_step[tracking on]": medians["on"] * 1e3,
            "tracking_on/off": medians["on"] / medians["off"],
            "added_us_per_step": (medians["on"] - medians["off"]) * 1e6,
        }
    )


CAPTURE_PATHS = ("module", "functional")
"""How the loss reaches the capture: a loss module given as ``loss_fn`` and called by the
step as ``state.loss_fn`` (its tap), or ``F.cross_entropy`` called inline in the step (seen
by the TorchFunctionMode in the first batch, then read from the loss backpropagated)."""
PATH_ROUNDS = 3  # x 2 settings x 2 paths x 2 workloads: within the per-test timeout


def _path_steps(work: Workload, path: str, track: bool) -> float:
    torch.manual_seed(0)
    model = work.make_model()
    clock = _Clock()
    trainer = onthefly.Trainer(
        project="bench", max_steps=work.steps, progress_bar=False, callbacks=[clock],
        quiet=True, port=0, track_samples=track,
    )  # fmt: skip
    # The same step on both paths; only the loss call differs.
    module = nn.CrossEntropyLoss() if path == "module" else None

    @trainer.training_step
    def step(batch: Any, state: Any) -> dict[str, torch.Tensor]:
        x, y = batch
        loss = (state.loss_fn or F.cross_entropy)(state.model(x), y)
        state.optimizer.zero_grad(set_to_none=True)
        state.backward(loss)
        state.optimizer.step()
        return {"loss": loss}

    trainer.fit(model, torch.optim.Adam(model.parameters(), lr=1e-3), module, make_loader(work))
    return (clock.end - clock.start) / clock.steps


@pytest.mark.parametrize("path", CAPTURE_PATHS)
@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_capture_cost_per_path(benchmark: Any, work: Workload, path: str) -> None:
    """Tracking on vs off, interleaved, for each way the loss reaches the capture."""
    torch.set_num_threads(1)

    def medians() -> dict[str, float]:
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(PATH_ROUNDS):
            for track in (False, True):
                times[track].append(_path_steps(work, path, track))
        return {"off": statistics.median(times[False]), "on": statistics.median(times[True])}

    short = replace(work, steps=WARMUP + 2)
    _path_steps(short, path, True)  # warm up imports and allocator
    found = benchmark.pedantic(medians, rounds=1, iterations=1)
    benchmark.extra_info.update(
        {
            f"ms_per_step[{path}, tracking off]": found["off"] * 1e3,
            f"ms_per_step[{path}, tracking on]": found["on"] * 1e3,
            "tracking_on/off": found["on"] / found["off"],
            "added_us_per_step": (found["on"] - found["off"]) * 1e6,
        }
    )


MLPS = [work for work in WORKLOADS if "mlp" in work.name]
CAPTURE_RUNS = 7


@pytest.mark.parametrize("work", MLPS, ids=[w.name for w in MLPS])
def test_training_thread_time_per_batch(
    benchmark: Any, monkeypatch: pytest.MonkeyPatch, work: Workload
) -> None:
    """Seconds per batch that per-sample capture takes on the training thread, timed around
    the calls, with tracking on and off in alternating runs.

    Per batch the capture is spread over: the recorder's batch hooks (the batch's ids, the
    slot opened and closed: a few lines inside hooks that run anyway), the loss call's report
    in the step (``Slot.report``), the hand-over of the recorder's rows to the tracker and
    the shipments (every 64 batches: a reference kept; reading them, the loss evaluated from
    the kept log-probabilities, the fold and the Parquet write are on the history thread, a
    few long NumPy and Arrow calls per 2^16 rows). So the figure is what the recorder's hooks
    take with tracking on less what they take with it off (the rows handed over included in both),
    plus the report in the step; of which the hand-over and the shipments are given apart,
    and the loss evaluations with ``reduction="none"``.

    The timing itself costs time: in a training step, where little of the code is still in
    the CPU's caches, a timed call costs a microsecond or two more than the call. So the same
    timer is put around three empty hooks of another callback, at the batch's start, before
    the backward pass (right after the loss call, where the capture runs) and at its end:
    that floor is reported (the on-off difference cancels the two hooks' own).

    Other load on a shared machine only ever adds to these times, by tens of percent from
    one run to the next, so the figures are those of the least of ``CAPTURE_RUNS`` runs of
    each setting (as ``timeit`` advises), with the median of the net figure beside them.
    """
    torch.set_num_threads(1)
    keys = ("recorder", "report", "hand-over", "shipments", "unreduced", "floor")
    spent = dict.fromkeys(keys, 0.0)
    training = threading.main_thread()

    def timed(original: Any, key: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not training or (
                key == "unreduced" and kwargs.get("reduction") != "none"
            ):
                return original(*args, **kwargs)  # elsewhere, or the training loss itself
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[key] += time.perf_counter() - start

        return call

    for owner, name, key in (
        (Recorder, "on_train_batch_start", "recorder"),
        (Recorder, "on_train_batch_end", "recorder"),
        (Slot, "report", "report"),
        (SampleTracker, "_receive_segment", "hand-over"),
        (SampleTracker, "_receive", "shipments"),
    ):
        monkeypatch.setattr(owner, name, timed(getattr(owner, name), key))
    for function in ("cross_entropy", "nll_loss"):
        monkeypatch.setattr(F, function, timed(getattr(F, function), "unreduced"))
    for name in ("on_train_batch_start", "on_before_backward", "on_train_batch_end"):
        monkeypatch.setattr(_Empty, name, timed(getattr(_Empty, name), "floor"))
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}

    def run() -> None:
        for track in (True, False):
            spent.update(dict.fromkeys(keys, 0.0))
            _steps(work, track, _Empty())
            runs[track].append({key: value / work.steps * 1e6 for key, value in spent.items()})

    benchmark.pedantic(run, rounds=CAPTURE_RUNS, iterations=1)
    off = min(figures["recorder"] for figures in runs[False])
    nets = [figures["recorder"] + figures["report"] - off for figures in runs[True]]
    least = runs[True][nets.index(min(nets))]
    benchmark.extra_info["us_per_batch[net of the recorder without tracking]"] = min(nets)
    benchmark.extra_info["us_per_batch[net, median]"] = statistics.median(nets)
    benchmark.extra_info["us_per_batch[recorder, tracking on]"] = least["recorder"]
    benchmark.extra_info["us_per_batch[recorder, tracking off]"] = off
    benchmark.extra_info["us_per_batch[of which report in the step]"] = least["report"]
    benchmark.extra_info["us_per_batch[of which hand-over]"] = least["hand-over"]
    benchmark.extra_info["us_per_batch[of which shipments]"] = least["shipments"]
    benchmark.extra_info["us_per_batch[of which unreduced losses]"] = least["unreduced"]
    benchmark.extra_info["us_per_batch[timer floor]"] = least["floor"]


class _Empty(pl.Callback):
    """Three empty hooks, at the points where the tracker's timed code runs."""

    def on_train_batch_start(self, *args: Any) -> None:
        pass

    def on_before_backward(self, *args: Any) -> None:
        pass

    def on_train_batch_end(self, *args: Any) -> None:
        pass


def _plain_eval(model: nn.Module, loader: DataLoader[Any]) -> float:
    loss_fn = nn.CrossEntropyLoss()
    model.eval()
    start = time.perf_counter()
    total = torch.zeros(())
    with torch.no_grad():
        for x, y in loader:
            total += loss_fn(model(x), y) * len(y)
    float(total)
    return time.perf_counter() - start


def _scan(model: nn.Module, loader: DataLoader[Any]) -> float:
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    start = time.perf_counter()
    assert run_scan(model, loader, spec, split="val", step=0, epoch=0) is not None
    return time.perf_counter() - start


@pytest.mark.parametrize("work", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_scan_throughput(benchmark: Any, work: Workload) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = work.make_model()
    loader = make_loader(work)
    _plain_eval(model, loader), _scan(model, loader)  # warm up

    def measure() -> dict[str, float]:
        plain, scan = [], []
        for _ in range(ROUNDS):
            plain.append(_plain_eval(model, loader))
            scan.append(_scan(model, loader))
        return {"plain": statistics.median(plain), "scan": statistics.median(scan)}

    times = benchmark.pedantic(measure, rounds=1, iterations=1)
    samples = len(loader.dataset)  # type: ignore[arg-type]
    benchmark.extra_info.update(
        {
            "samples_per_s[plain eval]": samples / times["plain"],
            "samples_per_s[scan]": samples / times["scan"],
            "scan/plain throughput": times["plain"] / times["scan"],
        }
    )


def test_export_a_million_rows_to_parquet(benchmark: Any, tmp_path: Path) -> None:
    n = 1_000_000
    rng = np.random.default_rng(0)
    loss = rng.random(n)
    view = SampleView(
        "train", "training", 0, np.arange(n), loss, np.exp(-loss), rng.random(n) * 0.1,
        rng.random(n), np.full(n, np.nan), rng.integers(0, 10, n).astype(np.float64),
        np.full(n, 3, dtype=np.int64),
    )  # fmt: skip
    path = export.target_path(tmp_path, "million", "parquet")

    def run() -> None:
        export.write(export.table(view, classes=True), path, "parquet", overwrite=True)

    benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info["seconds[1M rows -> parquet]"] = benchmark.stats.stats.median
    benchmark.extra_info["bytes"] = path.stat().st_size
