"""Runs for the resume tests: a noisy dataset, dropout, shuffling, both drivers.

``generator=True`` gives the training loader a generator of its own (its order and its
workers' seeds then come from it, not from the global generator).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Literal

import lightning.pytorch as pl
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import onthefly
from onthefly.callbacks.onthefly import OnTheFly

Noise = Literal["torch", "numpy", "python", "none"]


class Noisy(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Draws fresh noise on every read (like an augmentation), from torch's global RNG or,
    with ``noise``, from NumPy's or Python's (``"none"``: no noise)."""

    def __init__(self, n: int = 48, noise: Noise = "torch") -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 6, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.noise = noise

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.noise == "numpy":
            drawn = torch.from_numpy(np.random.randn(6).astype(np.float32))
        elif self.noise == "python":
            drawn = torch.tensor([random.gauss(0.0, 1.0) for _ in range(6)])
        elif self.noise == "torch":
            drawn = torch.randn(6)
        else:
            drawn = torch.zeros(6)
        return self.x[i] + 0.1 * drawn, self.y[i]


def data(workers: int = 0, generator: bool = False, noise: Noise = "torch") -> DataLoader[Any]:
    own = torch.Generator().manual_seed(7) if generator else None
    dataset = Noisy(noise=noise)
    return DataLoader(dataset, batch_size=8, shuffle=True, num_workers=workers, generator=own)


def net() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))


class Losses(pl.Callback):
    """Records each step's loss; exports the session after ``export_at`` steps. At the end
    of fit it keeps the per-sample store's state (``store``)."""

    def __init__(self, export_at: int | None = None, path: Path | None = None) -> None:
        self.losses: list[float] = []
        self.export_at, self.path = export_at, path
        self.store: dict[str, Any] = {}

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        otf = next((cb for cb in trainer.callbacks if isinstance(cb, OnTheFly)), None)
        if otf is not None and otf.sample_tracker is not None:  # state_dict folds the buffer
            self.store = otf.sample_tracker.state_dict()["store"]

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(float(loss))
        if trainer.global_step == self.export_at:
            otf = next(cb for cb in trainer.callbacks if isinstance(cb, OnTheFly))
            otf.checkpointer.export(trainer, self.path)


def native_run(
    steps: int,
    workers: int = 0,
    losses: Losses | None = None,
    resume_from: Path | None = None,
    generator: bool = False,
    extra: tuple[Any, ...] = (),
) -> Losses:
    """A native run to ``steps`` optimizer steps (6 batches per epoch)."""
    losses = losses or Losses()
    torch.manual_seed(99)  # a different global state each time: a resume must not depend on it
    model = net()
    trainer = onthefly.Trainer(
        project="resume",
        max_steps=steps,
        callbacks=[losses, *extra],
        progress_bar=False,
        quiet=True,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=data(workers, generator),
        scheduler=scheduler,
        scheduler_interval="step",
        resume_from=resume_from,
    )
    return losses


class Module(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = net()
        self.loss = nn.CrossEntropyLoss()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return self.loss(self.net(x), y)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.9)
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def lightning_run(
    steps: int,
    workers: int = 0,
    losses: Losses | None = None,
    resume_from: Path | None = None,
    generator: bool = False,
    attach: bool = True,
    extra: tuple[Any, ...] = (),
    noise: Noise = "torch",
) -> Losses:
    """A Lightning run to ``steps`` steps; ``attach=False`` runs it without OnTheFly."""
    losses = losses or Losses()
    torch.manual_seed(99)
    np.random.seed(98)
    random.seed(97)
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[losses, *extra],
    )
    module = Module()
    if attach:
        onthefly.attach_lightning(
            trainer, project="resume", quiet=True, resume_from=resume_from, loss_fn=module.loss
        )
    trainer.fit(module, train_dataloaders=data(workers, generator, noise))
    return losses
