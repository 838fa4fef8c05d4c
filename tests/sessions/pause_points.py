"""Pause a native run anywhere, export, stop, and resume the file in a new process.

The run is the kind that hides resume bugs: a noisy dataset (every read draws noise), two
worker processes or none, a training loader with or without a generator of its own,
dropout, SGD with momentum, a StepLR stepped at each epoch's end and a validation after
every epoch (its loader's iterator draws from the RNG too).

A :class:`PausePoint` says where the commands land: ``phase="end"`` sends ``pause``,
``export`` and ``stop`` while step ``step`` runs, so they take effect when it ends;
``phase="start"`` sends them right after step ``step`` ended, so they take effect at the
next batch's start — after the fetch (with workers prefetching), and for an epoch's last
step after the validation and the scheduler step. Commands go through a real websocket
client and are waited for until the session server handed them to the training thread.

:func:`resume_in_new_process` runs the resumed half in a child of a fork server that
imported torch, Lightning and OnTheFly once: a new process each time (nothing of the test
process's state is inherited), without paying the imports for every point.
"""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.callbacks.commanding import send_now
from tests.callbacks.conftest import Connect
from tests.native.handwritten import Noisy

BATCHES = 6
EPOCHS = 3
STEPS = BATCHES * EPOCHS


@dataclass(frozen=True)
class Config:
    """How the training loader loads."""

    workers: int
    generator: bool

    def __str__(self) -> str:
        return f"{self.workers}w-{'own' if self.generator else 'global'}"


@dataclass(frozen=True)
class PausePoint:
    """Where the pause lands: at the end of step ``step`` or at the start of the next batch."""

    step: int
    phase: str  # "end" or "start"

    def __str__(self) -> str:
        return f"{self.phase}-{self.step}"


def build(config: Config) -> dict[str, Any]:
    """The model, optimizer, scheduler and loaders, the same in every process."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    own = torch.Generator().manual_seed(1) if config.generator else None
    train = DataLoader(
        Noisy(8 * BATCHES, 0),
        batch_size=8,
        shuffle=True,
        generator=own,
        num_workers=config.workers,
    )
    torch.manual_seed(99)  # a different global state in every process: a resume must not care
    return {
        "model": model,
        "optimizer": optimizer,
        "scheduler": scheduler,
        "loss_fn": nn.CrossEntropyLoss(),
        "train_loader": train,
        "val_loader": DataLoader(Noisy(20, 1), batch_size=8),
    }


class Losses(pl.Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(float(outputs["loss"]))


def train(config: Config, callbacks: list[Any], resume_from: Path | None = None) -> list[float]:
    """Train to the end (or until stopped); the training losses in order."""
    losses = Losses()
    trainer = onthefly.Trainer(
        project="pause-points",
        max_epochs=EPOCHS,
        val_every_n_epochs=1,
        callbacks=[*callbacks, losses],
        progress_bar=False,
        quiet=True,
    )
    trainer.fit(**build(config), resume_from=resume_from)
    return losses.losses


class PauseExportStop(pl.Callback):
    """Sends ``pause``, ``export`` and ``stop`` at ``point`` (place after :class:`Connect`)."""

    def __init__(self, connect: Connect, point: PausePoint, path: Path) -> None:
        self.connect, self.point, self.path = connect, point, path
        self.ids: list[str] = []

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if self.point.phase == "end" and trainer.global_step + 1 == self.point.step:
            self._send(trainer)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if self.point.phase == "start" and trainer.global_step == self.point.step:
            self._send(trainer)

    def _send(self, trainer: Any) -> None:
        if self.ids:
            return
        client = self.connect.client
        assert client is not None
        commands = [("pause", {}), ("export", {"path": str(self.path)}), ("stop", {})]
        self.ids = send_now(trainer, client, commands)

    def answers(self) -> list[dict[str, Any]]:
        client = self.connect.client
        assert client is not None
        return [client.wait(lambda i=i: client.answers.get(i)) for i in self.ids]


def paused_run(
    config: Config, point: PausePoint, path: Path, home: Path
) -> tuple[list[float], list[dict[str, Any]]]:
    """The first half: train until ``point``, export to ``path``, stop.

    Returns:
        The losses trained, and the answers to pause, export and stop.
    """
    connect = Connect(home)
    commands = PauseExportStop(connect, point, path)
    losses = train(config, [connect, commands])
    answers = commands.answers()
    assert connect.client is not None
    connect.client.close()
    return losses, answers


def _resume_child(config: Config, path: str, home: str, out: Any) -> None:
    # As in a script started from a shell (a fork server's child inherits its method, and
    # DataLoader workers started through it are slow to start and to stop).
    multiprocessing.set_start_method("fork", force=True)
    os.environ["ONTHEFLY_HOME"], os.environ["ONTHEFLY_KEEP_ALIVE"] = home, "0"
    torch.set_num_threads(1)
    out.send(train(config, [], resume_from=Path(path)))
    out.close()


_PRELOAD = ["torch", "lightning.pytorch", "onthefly", "onthefly.server", __name__]


def resume_in_new_process(config: Config, path: Path, home: Path) -> list[float]:
    """The second half, in a new process: resume ``path`` and train to the end."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_resume_child, args=(config, str(path), str(home), send))
    child.start()
    send.close()
    try:
        if not receive.poll(120):
            raise AssertionError(f"the resumed run of {path.name} sent nothing within 120 s")
        losses: list[float] = receive.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
            child.join()
    assert child.exitcode == 0, f"the resumed run of {path.name} exited with {child.exitcode}"
    return losses
