"""The same callbacks under the native ``onthefly.Trainer``: telemetry, commands, the end."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

import onthefly
from tests.callbacks.conftest import Connect
from tests.callbacks.models import loader
from tests.callbacks.test_test_launcher import SendAt


class Norms(pl.Callback):
    """The clipped run's own total gradient norm, per step."""

    def __init__(self) -> None:
        self.norms: dict[int, float] = {}

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self.norms[trainer.global_step] = float(trainer.grad_norm)


def test_native_trainer_streams_and_obeys_commands(onthefly_home: Path) -> None:
    torch.manual_seed(0)
    connect, norms = Connect(onthefly_home), Norms()
    send = SendAt(connect, step=2, kind="test")
    trainer = onthefly.Trainer(
        project="tests",
        max_epochs=2,
        val_every_n_epochs=1,
        do_test_after=True,
        device="cpu",
        progress_bar=False,
        grad_clip_norm=0.5,
        callbacks=[connect, send, norms],
        port=0,
        quiet=True,
    )
    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(64),
        val_loader=loader(16, seed=1),
        test_loader=loader(16, seed=2),
    )
    client = connect.finished()

    train = client.of("metrics", split="train")
    assert [e["step"] for e in train] == list(range(1, 17))
    for event in train:
        assert {"loss", "lr", "grad_norm"} <= set(event["values"])
        assert math.isclose(event["values"]["grad_norm"], norms.norms[event["step"]], rel_tol=1e-6)
    val = client.of("metrics", split="val")
    assert [(e["step"], "loss" in e["values"]) for e in val] == [(8, True), (16, True)]
    assert [(e["epoch"], e["step"]) for e in client.of("epoch")] == [(0, 1), (1, 9)]

    results = client.of("test_result")
    assert [r["label"] for r in results] == ["test_1", "test_2"]  # command, then do_test_after
    assert results[-1]["step"] == 16
    assert all(r["loss"] == r["metrics"]["loss"] for r in results)
    assert send.command_id is not None and client.answers[send.command_id]["type"] == "reply"
    client.close()
