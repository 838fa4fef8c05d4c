"""Watchdog on live runs: alerts for non-finite values, loss spikes, stalls and crashes, seen
by a real websocket client, in the run's status and in its history."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

import onthefly
from onthefly import OnTheFly
from onthefly.callbacks.watchdog import from_data_loading, stall_seconds
from tests.callbacks.conftest import Connect
from tests.callbacks.live import LiveClient
from tests.callbacks.models import Tiny, lightning_trainer, loader


class Poisoned(nn.Module):
    """A linear classifier whose output turns NaN from step ``at`` (the loss follows)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.at = at
        self.step = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.step += 1
        out = self.net(x)
        return out * math.nan if self.step >= self.at else out


class Status(pl.Callback):
    """At step ``at``: the run's ``status`` reply and its history as an export saves it."""

    def __init__(self, connect: Connect, at: int) -> None:
        self.connect, self.at = connect, at
        self.reply: dict[str, Any] = {}
        self.history: Any = None

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step == self.at:
            session = trainer.callbacks[0].session
            session.quiesce()  # ship the steps so far: their alerts are published with them
            client = self.connect.client
            assert client is not None
            client.wait_event(lambda e: e["type"] == "alert" and e["kind"] == "nonfinite_grad")
            self.reply = client.call("status")
            self.history = session.server.history_snapshot()


def native_run(home: Path, model: nn.Module, data: Any, *callbacks: Any, **options: Any) -> Any:
    trainer = onthefly.Trainer(
        project="tests",
        run_name="watchdog",
        device="cpu",
        progress_bar=False,
        port=0,
        quiet=True,
        callbacks=list(callbacks),
        **options,
    )
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        train_loader=data,
    )
    return trainer


def alerts(client: LiveClient) -> list[tuple[str, str, int]]:
    return [(e["kind"], e["state"], e["step"]) for e in client.of("alert")]


def test_a_nan_loss_is_an_alert_in_the_stream_the_status_and_the_history(
    onthefly_home: Path,
) -> None:
    connect = Connect(onthefly_home)
    status = Status(connect, at=12)
    native_run(
        onthefly_home, Poisoned(at=6), loader(128), connect, status, max_steps=12,
        grad_norm_every_s=0,  # the norm at every step of these sub-millisecond steps
    )  # fmt: skip
    client = connect.finished()
    raised = [e for e in client.of("alert") if e["kind"] == "nonfinite_loss"]
    assert [(e["state"], e["step"], e["severity"]) for e in raised] == [("raised", 6, "error")]
    assert raised[0]["details"]["previous_step"] == 5
    assert "NaN at step 6" in raised[0]["message"]
    # The gradients of a NaN loss are NaN too: their norm gets its own alert.
    assert ("nonfinite_grad", "raised", 6) in alerts(client)
    assert status.reply["data"]["alerts"] == ["nonfinite_loss", "nonfinite_grad"]
    runs = {r["run"]: r for r in status.reply["data"]["runs"]}
    assert runs["watchdog"]["alerts"] == ["nonfinite_loss", "nonfinite_grad"]
    (run,) = status.history.runs
    assert [(a.kind, a.step) for a in run.alert_history] == [
        ("nonfinite_loss", 6),
        ("nonfinite_grad", 6),
    ]
    assert run.alerts == ["nonfinite_loss", "nonfinite_grad"]
    assert len(run.clock.steps) == len(run.clock.times) >= 1


def test_a_loss_spike_under_lightning_is_raised_then_cleared(onthefly_home: Path) -> None:
    class Spiky(Tiny):
        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = super().training_step(batch, batch_idx)
            return loss * 50 if self.global_step == 70 else loss

    connect = Connect(onthefly_home)
    otf = OnTheFly(project="tests", run_name="spiky", port=0, quiet=True)
    trainer = lightning_trainer(max_steps=190, callbacks=[otf, connect])
    trainer.fit(Spiky(), loader(64, shuffle=True), loader(8, seed=1))
    client = connect.finished()
    spikes = [(e["state"], e["step"]) for e in client.of("alert") if e["kind"] == "loss_spike"]
    # Steps count from 1 after the update; the bad update makes the next few losses high too
    # (one burst, one alert), and the alert clears 100 steps after the last of them.
    assert [state for state, _ in spikes] == ["raised", "cleared"]
    assert spikes[0][1] == 71 and 171 <= spikes[1][1] <= 190


class Slow(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A dataset whose item ``at`` takes ``seconds`` to load."""

    def __init__(self, at: int, seconds: float) -> None:
        self.data = TensorDataset(torch.randn(160, 8), torch.randint(0, 2, (160,)))
        self.at, self.seconds = at, seconds

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if index == self.at:
            time.sleep(self.seconds)
        return self.data[index]


def test_a_loader_that_hangs_is_a_stall_cleared_by_the_next_step(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    data = DataLoader(Slow(at=80, seconds=3.5), batch_size=8)
    native_run(onthefly_home, nn.Linear(8, 2), data, connect, max_steps=20, stall_seconds=1.0)
    client = connect.finished()
    stalls = [e for e in client.of("alert") if e["kind"] == "stalled"]
    assert [e["state"] for e in stalls] == ["raised", "cleared"]
    assert stalls[0]["step"] == 10  # the last step before the slow batch
    assert 1.0 <= stalls[0]["details"]["seconds"] < 3.5
    assert "no training step" in stalls[0]["message"]


def test_a_paused_run_is_never_stalled(onthefly_home: Path) -> None:
    resumer: list[threading.Thread] = []

    def resume_three_seconds_after_the_pause() -> None:
        client = connect.client
        assert client is not None
        client.wait(lambda: client.of("status", state="paused"))
        time.sleep(3.0)  # three times the stall limit, paused
        client.send("resume")

    class PauseFor(pl.Callback):
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 5:
                client = connect.client
                assert client is not None
                client.send("pause")  # taken at a later boundary, on this very thread
                resumer.append(threading.Thread(target=resume_three_seconds_after_the_pause))
                resumer[0].start()
            elif trainer.global_step > 5:
                time.sleep(0.2)  # the run cannot end before the command has come in

    connect = Connect(onthefly_home)
    native_run(
        onthefly_home,
        nn.Linear(8, 2),
        loader(160),
        connect,
        PauseFor(),
        max_steps=12,
        stall_seconds=1.0,
    )
    resumer[0].join(timeout=30)
    client = connect.finished()
    assert client.of("status", state="paused")
    assert [e for e in client.of("alert") if e["kind"] == "stalled"] == []


class Broken(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if index == 20:
            raise OSError(f"cannot read sample {index}: corrupt file")
        return torch.randn(8), torch.tensor(index % 2)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_loader_that_raises_ends_the_run_with_an_alert(onthefly_home: Path, workers: int) -> None:
    connect = Connect(onthefly_home)
    data = DataLoader(Broken(), batch_size=8, num_workers=workers)
    with pytest.raises(OSError, match="corrupt file"):
        native_run(onthefly_home, nn.Linear(8, 2), data, connect, max_steps=20)
    client = connect.finished()
    (crash,) = client.of("alert")
    assert (crash["kind"], crash["state"], crash["severity"]) == (
        "loader_crashed",
        "raised",
        "error",
    )
    assert crash["step"] == 2
    assert crash["details"]["exception"] == "OSError"
    assert "data loader failed" in crash["message"]
    finished = client.of("status")[-1]
    assert finished["state"] == "finished" and "OSError" in finished["reason"]


def test_another_exception_is_a_crash_alert_and_ctrl_c_none(onthefly_home: Path) -> None:
    class Fails(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(8, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("shapes do not match\nsecond line")

    connect = Connect(onthefly_home)
    with pytest.raises(ValueError):
        native_run(onthefly_home, Fails(), loader(64), connect, max_steps=3)
    (crash,) = connect.finished().of("alert")
    assert crash["kind"] == "crashed"
    assert crash["message"] == "the run ended with ValueError: shapes do not match"


def test_the_run_config_is_published_as_training_starts(onthefly_home: Path) -> None:
    class Configured(Tiny):
        def __init__(self, width: int = 16, dropout: float = 0.1) -> None:
            super().__init__()
            self.save_hyperparameters()

    class Status(pl.Callback):
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            assert connect.client is not None
            self.reply = connect.client.call("status")["data"]

    connect, status = Connect(onthefly_home), Status()
    otf = OnTheFly(project="tests", run_name="config", port=0, quiet=True)
    trainer = lightning_trainer(max_epochs=1, callbacks=[otf, connect, status])
    trainer.fit(Configured(width=32), loader(32), loader(8, seed=1))
    client = connect.finished()
    (config,) = client.of("config")
    values = config["values"]
    assert values["optimizer"] == "SGD" and values["lr"] == 0.1
    assert values["param_groups"] == 2
    assert values["batch_size"] == 8
    assert (values["max_epochs"], values["max_steps"]) == (1, None)
    assert values["model"] == "Configured" and values["parameters"] == 18
    assert (values["hparams.width"], values["hparams.dropout"]) == (32, 0.1)
    assert status.reply["runs"][0]["config"] == values


def test_the_shortest_stall_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert stall_seconds(None) == 30.0
    monkeypatch.setenv("ONTHEFLY_STALL_SECONDS", "2.5")
    assert stall_seconds(None) == 2.5
    assert stall_seconds(7.0) == 7.0
    monkeypatch.setenv("ONTHEFLY_STALL_SECONDS", "soon")
    assert stall_seconds(None) == 30.0


def test_data_loading_is_told_apart_by_where_the_exception_was_raised() -> None:
    with pytest.raises(OSError) as caught:
        next(iter(DataLoader(Broken(), batch_size=32)))
    assert from_data_loading(caught.value)
    assert not from_data_loading(ValueError("elsewhere"))
