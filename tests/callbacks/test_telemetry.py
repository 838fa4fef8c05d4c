"""Telemetry under a real Lightning fit, observed through a real websocket client."""

from __future__ import annotations

import logging
import math
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

import onthefly
from onthefly import OnTheFly
from onthefly.callbacks._recorder import LearningRates
from onthefly.callbacks.telemetry import GradNorms, without_split_prefix
from onthefly.errors import ConfigurationError
from tests.callbacks.conftest import Connect
from tests.callbacks.live import session_files
from tests.callbacks.models import Tiny, lightning_trainer, loader

ONTHEFLY_DIR = str(Path(onthefly.__file__).resolve().parent)


class Recorder(pl.Callback):
    """What the step really computed (read with syncs: the test's business, not OnTheFly's)."""

    def __init__(self) -> None:
        self.losses: dict[int, float] = {}
        self.norms: dict[int, float] = {}

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        squares = sum(float(p.grad.pow(2).sum()) for p in pl_module.parameters())
        self.norms[trainer.global_step + 1] = math.sqrt(squares)
        if trainer.global_step == 1:
            logging.getLogger("onthefly.server.transport").warning("the server's own record")

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses[trainer.global_step] = float(outputs["loss"])


def test_a_fit_streams_steps_evaluations_epochs_runtime_and_logs(onthefly_home: Path) -> None:
    recorder, connect = Recorder(), Connect(onthefly_home)
    showwarning, root_handlers = warnings.showwarning, list(logging.getLogger().handlers)
    otf = OnTheFly(
        project="tests", run_name="telemetry", port=0, quiet=True, runtime_interval_s=0.05
    )
    trainer = lightning_trainer(max_epochs=2, callbacks=[otf, recorder, connect])
    with pytest.warns(UserWarning, match="tiny warning"):
        trainer.fit(Tiny(step_sleep=0.02, chatty=True), loader(64), loader(16, seed=1))
    client = connect.finished()

    train = client.of("metrics", split="train")
    assert [e["step"] for e in train] == list(range(1, 17))
    assert [e["epoch"] for e in train] == [0] * 8 + [1] * 8
    for event in train:
        values, step = event["values"], event["step"]
        assert set(values) == {"loss", "lr", "lr/group1", "grad_norm", "train_acc"}
        assert (values["lr"], values["lr/group1"]) == (0.1, 0.05)
        assert values["loss"] == pytest.approx(recorder.losses[step], rel=1e-6)
        assert values["grad_norm"] == pytest.approx(recorder.norms[step], rel=1e-5)
        assert 0.0 <= values["train_acc"] <= 1.0

    val = client.of("metrics", split="val")  # the sanity check is not reported
    assert [(e["step"], set(e["values"])) for e in val] == [(8, {"loss"}), (16, {"loss"})]
    assert [(e["epoch"], e["step"]) for e in client.of("epoch")] == [(0, 1), (1, 9)]

    runtime = client.of("runtime")
    assert runtime and all(e["rss_bytes"] > 0 and e["cpu_percent"] is not None for e in runtime)
    assert any(e["step_time"] and e["step_time"] >= 0.02 for e in runtime)
    assert any(e["samples_per_s"] for e in runtime)

    records = [e["record"] for e in client.of("log")]
    assert {"level": "WARNING", "logger": "tiny", "message": "tiny step 1"}.items() <= next(
        r for r in records if r["logger"] == "tiny"
    ).items()
    assert any(r["message"].startswith("UserWarning: tiny warning") for r in records)
    assert not any(r["logger"].startswith("onthefly.server") for r in records)

    assert client.events[-1]["type"] == "status" and client.events[-1]["state"] == "finished"
    client.close()
    assert session_files(onthefly_home) == []
    assert warnings.showwarning == showwarning
    assert logging.getLogger().handlers == root_handlers


class SyncCounter:
    """Counts host-sync calls (``.item()``, ``.cpu()``, ``.tolist()``, ``float(t)``, …) made
    from OnTheFly's code."""

    NAMES = ("item", "cpu", "tolist", "numpy", "__float__", "__int__", "__bool__")

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        for name in self.NAMES:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))

    def _wrap(self, name: str, original: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            frames = traceback.extract_stack(limit=12)[:-1]
            if any(frame.filename.startswith(ONTHEFLY_DIR) for frame in frames):
                self.calls.append(name)
            return original(tensor, *args, **kwargs)

        return counted


class StepWindow(pl.Callback):
    """Snapshots the sync count at each step's start, before any flush could happen."""

    def __init__(self, counter: SyncCounter) -> None:
        self.counter = counter
        self.at_start: dict[int, int] = {}

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self.at_start[trainer.global_step + 1] = len(self.counter.calls)


def test_no_host_sync_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = SyncCounter(monkeypatch)
    window = StepWindow(counter)
    otf = OnTheFly(
        project="tests",
        port=0,
        quiet=True,
        flush_every_steps=10_000,
        flush_every_s=1e9,
        runtime_interval_s=60,
    )
    # prog_bar=True: Lightning's callback_metrics would call .item() on such values.
    trainer = lightning_trainer(max_epochs=1, callbacks=[window, otf], num_sanity_val_steps=0)
    trainer.fit(Tiny(prog_bar=True), loader(128), loader(16))

    # Steps 1..16 run without one sync from OnTheFly; at the epoch's end, the validation
    # results and the flush of the 16 buffered steps cost one copy each, and the per-sample
    # values of the epoch (the inline F.cross_entropy's) one copy of each of their columns.
    assert window.at_start[16] == window.at_start[2] == 0
    assert Counter(counter.calls) == Counter({"tolist": 2, "numpy": 3})


class EpochLogged(Tiny):
    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("seen", float(batch[0].shape[0]), on_step=False, on_epoch=True, reduce_fx="sum")
        return loss


def test_epoch_level_values_arrive_at_the_epochs_last_step(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    otf = OnTheFly(project="tests", port=0, quiet=True)
    trainer = lightning_trainer(max_epochs=2, callbacks=[otf, connect])
    trainer.fit(EpochLogged(), loader(64), loader(16))
    client = connect.finished()
    epoch_level = [e for e in client.of("metrics", split="train") if "loss" not in e["values"]]
    assert [(e["step"], e["values"]) for e in epoch_level] == [
        (8, {"seen": 64.0}),
        (16, {"seen": 64.0}),
    ]
    client.close()


def test_telemetry_that_cannot_read_a_step_warns_once_and_training_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def moved(*args: Any) -> Any:
        raise AttributeError("'_ResultCollection' object has no attribute 'valid_items'")

    monkeypatch.setattr("onthefly.drivers.lightning.LightningDriver.step_values", moved)
    otf = OnTheFly(project="tests", port=0, quiet=True)
    trainer = lightning_trainer(max_epochs=1, callbacks=[otf])
    trainer.fit(Tiny(), loader(64), loader(16))
    assert trainer.global_step == 8
    assert caplog.text.count("OnTheFly could not record a step; training goes on") == 1


@pytest.mark.parametrize(
    ("values", "split", "expected"),
    [
        ({"val_loss": 1.0, "val_acc": 0.5}, "val", {"loss": 1.0, "acc": 0.5}),
        ({"val/loss": 1.0, "f1": 0.25}, "val", {"loss": 1.0, "f1": 0.25}),
        ({"test_loss": 1.0, "val_loss": 2.0}, "test", {"loss": 1.0, "val_loss": 2.0}),
        ({"val_": 1.0, "validation_loss": 2.0}, "val", {"val_": 1.0, "validation_loss": 2.0}),
        ({"loss": 1.0, "val_loss": 2.0}, "val", {"loss": 1.0, "val_loss": 2.0}),
    ],
)
def test_evaluation_names_lose_their_split_prefix(
    values: dict[str, float], split: str, expected: dict[str, float]
) -> None:
    assert without_split_prefix(values, split) == expected


def test_learning_rates_and_gradient_norm_follow_param_groups_added_during_the_run() -> None:
    first, second = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(first.parameters(), lr=0.1)
    for layer in (first, second):
        layer(torch.ones(1, 2)).sum().backward()
    rates, norms = LearningRates([optimizer]), GradNorms()
    assert rates.names == ["lr"] and rates.single
    norm = norms.of(optimizer)
    assert norm is not None and len(norm.parts) == 2
    optimizer.add_param_group({"params": list(second.parameters()), "lr": 0.01})
    assert rates.current([optimizer]) is False  # the recorder then reads the optimizer anew
    rates = LearningRates([optimizer])
    assert rates.named([group["lr"] for group in rates.groups]) == {"lr": 0.1, "lr/group1": 0.01}
    norm = norms.of(optimizer)
    assert norm is not None and len(norm.parts) == 4


class Sleepy(Tiny):
    """Steps of a few milliseconds, except every fifth step, which takes 250 ms."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        time.sleep(0.25 if self.global_step % 5 == 4 else 0.001)
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("every", [0.0, 0.2, 60.0])
def test_the_gradient_norm_is_taken_at_most_once_per_interval_of_training(
    onthefly_home: Path, every: float
) -> None:
    # A norm costs tens of microseconds a step: on fast steps it is taken once per interval,
    # on steps longer than the interval every time, and always at the first step.
    connect = Connect(onthefly_home)
    otf = OnTheFly(project="tests", port=0, quiet=True, grad_norm_every_s=every)
    trainer = lightning_trainer(max_steps=20, callbacks=[otf, connect])
    trainer.fit(Sleepy(), loader(512), loader(16, seed=1))
    train = connect.finished().of("metrics", split="train")
    normed = [e["step"] for e in train if "grad_norm" in e["values"]]
    assert [e["step"] for e in train] == list(range(1, 21))  # every step has its loss
    if every == 0.0:
        assert normed == list(range(1, 21))
    elif every == 60.0:
        assert normed == [1]
    else:  # each step after a 250-ms one (6, 11, 16) is due; the fast ones in between not all
        assert normed[0] == 1 and {6, 11, 16} <= set(normed) and len(normed) < 20


def test_a_gradient_norm_interval_must_be_a_number_of_seconds() -> None:
    with pytest.raises(ConfigurationError, match="grad_norm_every_s=-1; expected a number"):
        OnTheFly(project="tests", grad_norm_every_s=-1)


class Windows(Tiny):
    """Keeps each micro-batch's loss as the step computed it, and validates on two loaders."""

    def __init__(self) -> None:
        super().__init__()
        self.micro: list[tuple[int, float]] = []  # (optimizer steps before it, loss)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = super().training_step(batch, batch_idx)
        self.log("train_loss", loss, on_step=True)
        self.micro.append((self.global_step, float(loss.detach())))
        return loss

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y))


def test_accumulated_steps_show_their_windows_mean_and_each_validation_loader(
    onthefly_home: Path,
) -> None:
    # 10 batches, windows of 4: 4, 4 and a short last window of 2, every epoch.
    connect = Connect(onthefly_home)
    model = Windows()
    trainer = lightning_trainer(
        max_epochs=2,
        accumulate_grad_batches=4,
        callbacks=[OnTheFly("tests", port=0, quiet=True), connect],
    )
    trainer.fit(model, loader(80), [loader(16, seed=1), loader(24, seed=2)])
    client = connect.finished()

    train = client.of("metrics", split="train")
    assert [e["step"] for e in train] == list(range(1, 7))
    for event in train:
        window = [loss for before, loss in model.micro if before == event["step"] - 1]
        assert len(window) == (2 if event["step"] % 3 == 0 else 4)
        assert event["values"]["loss"] == pytest.approx(sum(window) / len(window), rel=1e-6)
        assert event["values"]["train_loss"] == pytest.approx(window[-1], rel=1e-6)

    val = client.of("metrics", split="val")
    assert [e["step"] for e in val] == [3, 6]
    final = trainer.callback_metrics
    assert set(val[-1]["values"]) == {"loss/dataloader_idx_0", "loss/dataloader_idx_1"}
    for index in (0, 1):
        name = f"loss/dataloader_idx_{index}"
        assert val[-1]["values"][name] == pytest.approx(float(final[f"val_{name}"]), rel=1e-6)
    client.close()
