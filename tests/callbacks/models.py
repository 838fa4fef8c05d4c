"""A tiny LightningModule and its data, shared by the callback tests and their scripts."""

from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

log = logging.getLogger("tiny")


def loader(n: int = 64, batch_size: int = 8, seed: int = 0, shuffle: bool = False) -> DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle)


class Tiny(pl.LightningModule):
    """A linear classifier that logs a metric and, when chatty, a log record and a warning.

    Args:
        step_sleep: seconds each training step sleeps (slows a run down for control tests).
        prog_bar: log the training metric to the progress bar too.
        chatty: at step 1, log a warning record and emit a ``UserWarning``.
    """

    def __init__(self, step_sleep: float = 0.0, prog_bar: bool = False, chatty: bool = False):
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.step_sleep = step_sleep
        self.prog_bar = prog_bar
        self.chatty = chatty

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self.net(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_acc", (logits.argmax(1) == y).float().mean(), prog_bar=self.prog_bar)
        if self.chatty and self.global_step == 1:
            log.warning("tiny step %d", self.global_step)
            warnings.warn("tiny warning", UserWarning, stacklevel=1)
        if self.step_sleep:
            time.sleep(self.step_sleep)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("test_loss", F.cross_entropy(logits, y))
        self.log("test_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        groups: list[dict[str, Any]] = [
            {"params": [self.net.weight]},
            {"params": [self.net.bias], "lr": 0.05},
        ]
        return torch.optim.SGD(groups, lr=0.1)


def lightning_trainer(**kwargs: Any) -> pl.Trainer:
    """A quiet CPU trainer (no logger, checkpoints, progress bar or summary)."""
    options: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    options.update(kwargs)
    return pl.Trainer(**options)
