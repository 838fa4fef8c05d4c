"""Runs a conformance script twice, without and with OnTheFly, and says what differed.

A script is a module of ``tests/conformance/scripts/`` written the way users write training
scripts (Lightning's examples, pytorch/examples), with one entry point::

    def main(run: Run) -> Any  # returns the trained model

It trains with the callbacks ``run.callbacks()`` (Lightning) or the options
``run.native()`` (``onthefly.Trainer``). The harness compares the two runs: every value the
script logged (read at every batch, evaluation and epoch end), the final weights bit for bit,
and the console output (OnTheFly may add its dashboard line, nothing else). In the run with
OnTheFly it checks what a real websocket client received (training steps on Lightning's
``global_step`` axis, the validation values of every loader) and the per-sample rows (the
dataset indices trained on, and losses that average to the step's loss).
"""

from __future__ import annotations

import importlib
import math
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from onthefly.batches import batch_size
from onthefly.callbacks.onthefly import OnTheFly
from onthefly.callbacks.sample_tracker import SampleTracker
from tests.callbacks.conftest import Connect

Logged = list[tuple[str, int, dict[str, float]]]


def _numbers(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        name: float(value.detach()) if isinstance(value, torch.Tensor) else float(value)
        for name, value in metrics.items()
        if isinstance(value, (int, float))
        or (isinstance(value, torch.Tensor) and value.numel() == 1)
    }


class Recorder(pl.Callback):
    """Everything the script logs, and the steps and losses as the trainer saw them.

    Attributes:
        logged: ``(hook, global_step, callback_metrics)`` at every batch, evaluation and
            epoch end.
        steps: ``trainer.global_step`` after each training batch that stepped an optimizer.
        losses: each training batch's loss as the step output gave it.
    """

    def __init__(self) -> None:
        self.logged: Logged = []
        self.steps: list[int] = []
        self.losses: list[tuple[int, float]] = []  # (optimizer step, loss)
        self.sizes: list[int] = []  # each batch's samples
        self._before = 0
        self._fitting = False
        self._divided = 1
        self.tracker: SampleTracker | None = None
        self.history: Any = None

    def _record(self, hook: str, trainer: Any) -> None:
        self.logged.append((hook, int(trainer.global_step), _numbers(trainer.callback_metrics)))

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self._fitting = True
        # Lightning hands over each micro-batch loss divided by accumulate_grad_batches.
        automatic = getattr(pl_module, "automatic_optimization", False)
        self._divided = int(getattr(trainer, "accumulate_grad_batches", 1)) if automatic else 1

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        self._fitting = False

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        self._before = int(trainer.global_step)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._record("train_batch", trainer)
        step = int(trainer.global_step)
        if step != self._before:
            self.steps.append(step)
        else:  # a micro-batch of the coming optimizer step
            step = self._before + 1
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor):
            self.losses.append((step, float(loss.detach()) * self._divided))
            self.sizes.append(batch_size(batch))

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._record("validation" if self._fitting else "validation_after_fit", trainer)

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._record("test" if self._fitting else "test_after_fit", trainer)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._record("train_epoch", trainer)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        # Read the per-sample history before the session (and its folder) goes away.
        for callback in trainer.callbacks:
            if isinstance(callback, OnTheFly) and callback.sample_tracker is not None:
                self.tracker = callback.sample_tracker
                self.tracker.flush()
                folder = self.tracker.session.workdir / "samples" / "history"
                parts = list(folder.glob("*.parquet")) if folder.is_dir() else []
                table = pq.read_table(folder) if parts else None
                self.history = (
                    None
                    if table is None
                    else {name: table[name].to_numpy() for name in ("step", "index", "loss")}
                )


@dataclass
class Run:
    """What a script trains with: the recorder, and OnTheFly when ``onthefly`` is set."""

    onthefly: bool
    home: Path
    recorder: Recorder = field(default_factory=Recorder)
    connect: Connect | None = None

    def callbacks(self, *more: Any) -> list[Any]:
        """Lightning's ``callbacks=``: the script's own ``more`` first, then ours."""
        ours: list[Any] = [self.recorder]
        if self.onthefly:
            self.connect = Connect(self.home)
            ours = [OnTheFly("conformance", port=0), self.connect, *ours]
        return [*more, *ours]

    def native(self, *more: Any) -> dict[str, Any]:
        """``onthefly.Trainer`` options: the session on or off, the recorder, no bar."""
        options: dict[str, Any] = {"session": self.onthefly, "progress_bar": False}
        callbacks: list[Any] = [*more, self.recorder]
        if self.onthefly:
            self.connect = Connect(self.home)
            callbacks.insert(0, self.connect)
            options["port"] = 0
        return {**options, "callbacks": callbacks}


@dataclass
class Outcome:
    run: Run
    model: Any
    out: str
    err: str
    warnings: list[tuple[str, str]]


def run_script(name: str, onthefly: bool, home: Path, capfd: Any) -> Outcome:
    """Run ``scripts/<name>.py``'s ``main`` once, from the same seed."""
    module = importlib.import_module(f"tests.conformance.scripts.{name}")
    capfd.readouterr()
    torch.manual_seed(0)
    np.random.seed(0)
    run = Run(onthefly, home)
    # The libraries' own warnings (Lightning's advice, deprecations) are the script's business;
    # the check is that OnTheFly adds none.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = module.main(run)
    out, err = capfd.readouterr()
    raised = [(w.category.__name__, w.filename) for w in caught]
    return Outcome(run, model, out, err, raised)


def check(name: str, home: Path, capfd: Any) -> None:
    """Both runs of ``name`` agree, and the client saw the run as it was."""
    module = importlib.import_module(f"tests.conformance.scripts.{name}")
    plain = run_script(name, False, home, capfd)
    tracked = run_script(name, True, home, capfd)
    _same_training(plain, tracked)
    _quiet(plain, tracked)
    _client_saw_the_run(tracked)
    if getattr(module, "PER_SAMPLE", True):
        mean, size = getattr(module, "PER_SAMPLE_MEAN", True), getattr(module, "SIZE", None)
        _per_sample_rows(tracked, mean, size, getattr(module, "EVERY_SAMPLE", True))


def _same_training(plain: Outcome, tracked: Outcome) -> None:
    assert tracked.run.recorder.logged == plain.run.recorder.logged  # every value, bit for bit
    a, b = _state(plain.model), _state(tracked.model)
    assert a.keys() == b.keys()
    different = [k for k in a if not torch.equal(a[k], b[k])]
    assert not different, f"final weights differ: {different}"


def _state(model: Any) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


_LIGHTNING_PREFIXES = ("GPU available", "TPU available", "💡 Tip", "`Trainer.fit` stopped")


def _quiet(plain: Outcome, tracked: Outcome) -> None:
    """OnTheFly adds its dashboard line to the console, and nothing else."""
    assert "Traceback" not in tracked.err and "Traceback" not in tracked.out
    extra = Counter(_lines(tracked)) - Counter(_lines(plain))
    added = [line for line in extra.elements() if not line.startswith("[onthefly] dashboard:")]
    assert not added, f"OnTheFly added console output: {added}"
    warned = Counter(tracked.warnings) - Counter(plain.warnings)
    assert not warned, f"OnTheFly added warnings: {list(warned)}"


def _lines(outcome: Outcome) -> list[str]:
    text = outcome.out + "\n" + outcome.err
    return [line for line in text.splitlines() if line.strip()]


def _client_saw_the_run(tracked: Outcome) -> None:
    connect, recorder = tracked.run.connect, tracked.run.recorder
    assert connect is not None
    client = connect.finished()
    try:
        train = client.of("metrics", split="train")
        # One row per optimizer step, on the trainer's own global_step axis.
        stepped = [e for e in train if any(name.startswith("lr") for name in e["values"])]
        assert [e["step"] for e in stepped] == recorder.steps, [e["values"] for e in train][:3]
        by_step = {e["step"]: e["values"]["loss"] for e in train if "loss" in e["values"]}
        windows: dict[int, list[float]] = {}
        for step, loss in recorder.losses:
            windows.setdefault(step, []).append(loss)
        for step, shown in by_step.items():
            assert math.isfinite(shown)
            window = windows[step]
            assert shown == _approx(sum(window) / len(window)), (step, shown, window)
        val = client.of("metrics", split="val")
        validations = [values for hook, _, values in recorder.logged if hook == "validation"]
        assert len(val) == len(validations)
        for event, values in zip(val, validations, strict=True):
            names = {n for n in values if n.startswith("val")}
            shown_names = (
                {f"val_{n}" for n in event["values"]}
                | {f"val/{n}" for n in event["values"]}
                | set(event["values"])
            )
            assert names <= shown_names, (names, event["values"])
    finally:
        client.close()


def _approx(value: float) -> Any:
    return pytest.approx(value, rel=1e-5, abs=1e-6)


def _per_sample_rows(tracked: Outcome, mean: bool, size: int | None, every: bool) -> None:
    recorder = tracked.run.recorder
    history = recorder.history
    assert history is not None and len(history["index"]) > 0, "no per-sample row was recorded"
    if size is not None:  # map-style data: dataset indices (each trained on, in full epochs)
        ids = set(history["index"].tolist())
        assert ids == set(range(size)) if every else ids <= set(range(size))
    if not mean:
        return
    # Each step's per-sample losses average to the mean loss of its batches (weighted by
    # their sizes: a mean-reduced loss is the mean over the batch's samples).
    totals: dict[int, list[float]] = {}
    for (step, loss), n in zip(recorder.losses, recorder.sizes, strict=True):
        total = totals.setdefault(step, [0.0, 0.0])
        total[0] += loss * n
        total[1] += n
    checked = 0
    for step, (weighted, n) in totals.items():
        rows = history["loss"][history["step"] == step]
        if len(rows):
            assert len(rows) == n, (step, len(rows), n)
            assert float(rows.mean()) == _approx(weighted / n), (step, float(rows.mean()))
            checked += 1
    assert checked == len(totals), f"{checked} of {len(totals)} steps have per-sample rows"
