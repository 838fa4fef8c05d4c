"""Live runs of the synthetic task for the fork tests: a real native or Lightning fit, a real
session server and a real websocket client that pauses the run at a known step.

``script(client, trainer)`` runs on a thread of its own while the run is paused at step
:data:`PAUSE_AT` (the training thread waits at that boundary, so reading the trainer from
the script is safe); when it returns, the run resumes and trains to ``max_steps``.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from onthefly.callbacks.onthefly import OnTheFly
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.live import LiveClient
from tests.callbacks.models import lightning_trainer
from tests.forks import synthetic

PAUSE_AT = 150
"""The parent's step when the script runs (enough to learn the bands, not the discs)."""

HARD_LR = 1e-3
"""A fork's learning rate on the hard slice (a short fine-tune)."""

TASK = synthetic.make_task()
"""The task the live runs train on."""

HARD = TASK.hard_train_idx
"""The training indices of the task's hard slice (what a fork specialises on by default)."""

Script = Callable[[LiveClient, Any], None]


class Recorder(pl.Callback):
    """Every training step's loss, as a Python float (both drivers)."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))


@dataclass
class Run:
    """A finished live run: its trainer, model, optimizer and per-step losses."""

    trainer: Any
    model: nn.Module
    optimizer: torch.optim.Optimizer | None
    losses: list[float]
    spawner: Any = None
    client: LiveClient | None = None


def loaders(task: synthetic.Task) -> tuple[DataLoader, DataLoader]:
    train = DataLoader(task.train, batch_size=64, shuffle=True)
    return train, DataLoader(task.val, batch_size=500)


def native_run(
    home: Path,
    script: Script | None = None,
    *,
    max_steps: int = PAUSE_AT + 20,
    pause_at: int = PAUSE_AT,
    val: bool = True,
    step_fn: Callable[[nn.Module], Callable[..., Any]] | None = None,
    resume_from: Path | None = None,
) -> Run:
    """Train the synthetic parent natively; ``script`` runs while paused at :data:`PAUSE_AT`
    (no pause without a script)."""
    torch.manual_seed(0)
    task = synthetic.make_task()
    model = synthetic.make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=synthetic.PARENT_LR)
    train, val_loader = loaders(task)
    connect, recorder = Connect(home), Recorder()
    callbacks: list[Any] = [connect, recorder]
    if script is not None:
        callbacks.append(CommandsAt(connect, pause_at, ("pause", {})))
    trainer = onthefly.Trainer(
        project="forks",
        run_name="main",
        max_steps=max_steps,
        progress_bar=False,
        quiet=True,
        port=0,
        callbacks=callbacks,
    )
    if step_fn is not None:
        trainer.training_step(step_fn(model))
    run = Run(trainer, model, optimizer, recorder.losses, spawner=_spawner(trainer))
    with _talking(connect, script, run):
        trainer.fit(
            model,
            optimizer,
            nn.CrossEntropyLoss(),
            train,
            val_loader if val else None,
            resume_from=resume_from,
        )
    return run


class Classifier(pl.LightningModule):
    """The synthetic MLP as a LightningModule that logs its accuracy."""

    def __init__(self) -> None:
        super().__init__()
        self.net = synthetic.make_model()
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        self.log("train_acc", (logits.argmax(1) == y).float().mean())
        return self.loss(logits, y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=synthetic.PARENT_LR)


def lightning_run(
    home: Path, script: Script | None = None, *, max_steps: int = PAUSE_AT + 20
) -> Run:
    """The same parent as a Lightning run (``attach_lightning``, loss and loaders given)."""
    torch.manual_seed(0)
    task = synthetic.make_task()
    module = Classifier()
    train, val_loader = loaders(task)
    connect, recorder = Connect(home), Recorder()
    callbacks: list[Any] = [connect, recorder]
    if script is not None:
        callbacks.append(CommandsAt(connect, PAUSE_AT, ("pause", {})))
    trainer = lightning_trainer(max_steps=max_steps, callbacks=callbacks)
    onthefly.attach_lightning(
        trainer,
        project="forks",
        run_name="main",
        loss_fn=module.loss,
        val_loader=val_loader,
        quiet=True,
        port=0,
    )
    run = Run(trainer, module, None, recorder.losses, spawner=_spawner(trainer))
    with _talking(connect, script, run):
        trainer.fit(module, train)
    return run


def _spawner(trainer: Any) -> Any:
    return next(cb for cb in trainer.callbacks if isinstance(cb, OnTheFly)).fork_spawner


class _talking:
    """Runs the script on a thread once the run is paused, then resumes the run."""

    def __init__(self, connect: Connect, script: Script | None, run: Run) -> None:
        self.connect, self.script, self.run = connect, script, run
        self.failures: list[BaseException] = []
        self.thread = threading.Thread(target=self._talk, daemon=True)

    def __enter__(self) -> None:
        if self.script is not None:
            self.thread.start()

    def __exit__(self, *exc: Any) -> None:
        if self.script is not None:
            self.thread.join(60)
        if self.connect.client is not None:
            self.run.client = self.connect.client
            self.connect.client.close()
        if self.failures and exc[0] is None:
            raise self.failures[0]

    def _talk(self) -> None:
        assert self.script is not None
        try:
            client = self._client()
            client.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")
            self.script(client, self.run.trainer)
        except BaseException as exc:  # reported on the test's thread
            self.failures.append(exc)
            if self.connect.client is not None:
                self.connect.client.send("stop")
            return
        client.send("resume")

    def _client(self) -> LiveClient:
        while self.connect.client is None:
            time.sleep(0.01)
        return self.connect.client


# ---------------------------------------------------------------------------- parent state


def parent_state(trainer: Any, model: nn.Module) -> dict[str, Any]:
    """Everything a fork must leave as it is: weights, gradients, optimizer, RNG, steps."""
    optimizer = trainer.optimizers[0]
    iterator = getattr(getattr(trainer, "train_loader", None), "iterator", None)
    return {
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        "optimizer": copy.deepcopy(optimizer.state_dict()),
        "rng": (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate()),
        "step": (trainer.global_step, trainer.current_epoch),
        "data": None if iterator is None else (id(iterator), iterator.fetched),
        "modes": [m.training for m in model.modules()],
        "grad_enabled": torch.is_grad_enabled(),
    }


def assert_same(before: Any, after: Any, where: str = "state") -> None:
    """Bit-for-bit equality of nested tensors, arrays and plain values."""
    if isinstance(before, torch.Tensor):
        assert torch.equal(before, after), where
    elif isinstance(before, np.ndarray):
        assert np.array_equal(before, after), where
    elif isinstance(before, dict):
        assert before.keys() == after.keys(), where
        for key in before:
            assert_same(before[key], after[key], f"{where}.{key}")
    elif isinstance(before, list | tuple):
        assert len(before) == len(after), where
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
    else:
        assert before == after, where


def reply(answer: dict[str, Any]) -> dict[str, Any]:
    """The data of a reply frame (fails on an error frame, showing it)."""
    assert answer["type"] == "reply", answer
    data: dict[str, Any] = answer["data"]
    return data


def error(answer: dict[str, Any]) -> tuple[str, str]:
    """The code and message of an error frame."""
    assert answer["type"] == "error", answer
    return answer["error"]["code"], answer["error"]["message"]


def start_fork(client: LiveClient, name: str, **fields: Any) -> dict[str, Any]:
    """Fork the paused run (on the hard slice, 20 steps at :data:`HARD_LR`, unless ``fields``
    say otherwise) and return the reply's data."""
    budget = {} if "epochs" in fields else {"steps": 20}
    fields = {"indices": HARD, "lr": HARD_LR, **budget, **fields}
    return reply(client.call("fork", name=name, **fields))
