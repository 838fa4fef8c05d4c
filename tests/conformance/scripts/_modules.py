"""A digits classifier LightningModule that several conformance scripts configure."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F


class DigitsClassifier(pl.LightningModule):
    """An MLP over the 64 digit pixels; its loss inline, validation and test steps log.

    Args:
        lr: Adam's learning rate.
        hidden: the hidden layer's width.
    """

    def __init__(self, lr: float = 1e-2, hidden: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
        x, y = batch
        logits = self(x)
        self.log("test_loss", F.cross_entropy(logits, y))
        self.log("test_acc", (logits.argmax(1) == y).float().mean())

    def predict_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self(batch[0]).argmax(1)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
