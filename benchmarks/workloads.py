"""The workloads every benchmark shares: an MLP 32-64-2 on 4096x32 features (batch 128), a
wider MLP 64-256-256-10 (batch 128: a step of 1-3 ms, where a fixed per-step cost still
shows) and a CNN of about 2M parameters on 3x32x32 inputs (batch 32)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


@dataclass(frozen=True)
class Workload:
    """One benchmark workload: a model factory and random classification data."""

    name: str
    make_model: Any
    features: tuple[int, ...]
    classes: int
    samples: int
    batch_size: int
    steps: int


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))


def wide_mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)
    )


def cnn() -> nn.Module:
    """About 2.0M parameters on 3x32x32 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(256 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10),
    )  # fmt: skip


WORKLOADS = [
    Workload("mlp", mlp, (32,), 2, 4096, 128, 256),
    Workload("wide-mlp", wide_mlp, (64,), 10, 8192, 128, 256),
    Workload("cnn", cnn, (3, 32, 32), 10, 512, 32, 40),
]


def make_loader(work: Workload, shuffle: bool = True) -> DataLoader[Any]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(work.samples, *work.features, generator=generator)
    y = torch.randint(0, work.classes, (work.samples,), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=work.batch_size, shuffle=shuffle)


def fit_native(trainer: Any, model: nn.Module, work: Workload) -> None:
    """Train ``model`` on ``work``'s data with an ``onthefly.Trainer``: Adam, cross-entropy."""
    trainer.fit(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=make_loader(work),
    )


def lightning_trainer(callbacks: list[Any], steps: int) -> pl.Trainer:
    """A ``lightning.Trainer`` on the CPU for ``steps`` steps, with nothing besides
    ``callbacks`` (no logger, checkpoints, progress bar or summary)."""
    return pl.Trainer(
        callbacks=callbacks, max_steps=steps, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu", devices=1,
    )  # fmt: skip
