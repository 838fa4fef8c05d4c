"""A LightningModule computing its loss inline (F.cross_entropy), with a validation loader."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 240


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def main(run: Any) -> Classifier:
    model = Classifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    train = DataLoader(digits(0, SIZE), batch_size=32, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
