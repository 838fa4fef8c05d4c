"""HparamEditor: ``set`` on live runs — the next step uses it, a scheduler keeps it, and every
change is an event and part of the callback's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch.nn import functional as F
from torch.optim import lr_scheduler

import onthefly
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.models import Tiny, lightning_trainer, loader
from tests.health import models


class Lrs(pl.Callback):
    """Each optimizer step's learning rates, read just before the step."""

    def __init__(self) -> None:
        self.by_step: list[list[float]] = []

    def on_before_optimizer_step(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.by_step.append([float(g["lr"]) for g in optimizer.param_groups])


def test_set_lr_under_the_native_trainer_survives_its_scheduler(onthefly_home: Path) -> None:
    connect, lrs = Connect(onthefly_home), Lrs()
    sender = CommandsAt(connect, 3, ("set", {"lr": 0.01}))
    trainer = onthefly.Trainer(
        project="tests",
        max_steps=6,
        device="cpu",
        progress_bar=False,
        callbacks=[connect, sender, lrs],
        port=0,
        quiet=True,
    )
    model = models.healthy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # A per-step schedule that would put the lr back to 0.1 at every step.
    constant = lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=F.cross_entropy,
        train_loader=list(models.loader()),
        scheduler=constant,
        scheduler_interval="step",
    )
    [answer] = sender.answers()
    changes = answer["data"]["changes"]
    assert changes == [
        {"step": 3, "optimizer": 0, "group": 0, "name": "lr", "old": 0.1, "new": 0.01}
    ]
    assert [lr for [lr] in lrs.by_step] == [0.1, 0.1, 0.1, 0.01, 0.01, 0.01]
    client = connect.finished()
    events = client.of("hparam_change")
    assert [{k: e[k] for k in changes[0]} for e in events] == changes
    lr_events = {e["step"]: e["values"]["lr"] for e in client.of("metrics", split="train")}
    assert lr_events[3] == 0.1 and lr_events[4] == 0.01
    otf = trainer.callbacks[0]
    assert otf.state_dict()["HparamEditor"] == {"changes": changes}
    client.close()


def test_set_one_group_under_lightning(onthefly_home: Path) -> None:
    connect, lrs = Connect(onthefly_home), Lrs()
    senders = [
        CommandsAt(connect, 2, ("set", {"lr": 0.02, "group": 1})),
        CommandsAt(connect, 3, ("set", {"momentum": 0.5, "group": 5})),
        CommandsAt(connect, 4, ("set", {"betas": [0.9, 0.99]})),
    ]
    otf = onthefly.OnTheFly(project="tests", port=0, quiet=True)
    trainer = lightning_trainer(max_steps=5, callbacks=[otf, connect, *senders, lrs])
    trainer.fit(Tiny(), loader(64), loader(16, seed=1))
    answers = [s.answers()[0] for s in senders]
    assert answers[0]["data"]["changes"][0]["old"] == 0.05
    assert lrs.by_step == [[0.1, 0.05], [0.1, 0.05], [0.1, 0.02], [0.1, 0.02], [0.1, 0.02]]
    assert answers[1]["error"] == {
        "code": "unsupported",
        "message": "param group 5 does not exist; SGD has 2 group(s) (0-1)",
    }
    assert answers[2]["error"]["message"].startswith("SGD has no 'betas' in its param groups")
    client = connect.finished()
    assert [(e["step"], e["group"], e["new"]) for e in client.of("hparam_change")] == [(2, 1, 0.02)]
    client.close()
