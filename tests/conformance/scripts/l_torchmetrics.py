"""torchmetrics objects logged per step and per epoch (Accuracy, F1), and a StepLR schedule."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
import torchmetrics
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 240


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        self.train_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
        self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=10)
        self.val_f1 = torchmetrics.F1Score(task="multiclass", num_classes=10, average="macro")

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        logits = self.net(x)
        self.train_acc(logits, y)
        self.log("train_acc", self.train_acc, on_step=True, on_epoch=True)
        return F.nll_loss(F.log_softmax(logits, dim=1), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.val_acc(logits, y)
        self.val_f1(logits, y)
        self.log_dict({"val_acc": self.val_acc, "val_f1": self.val_f1})

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=1e-2)
        return {
            "optimizer": optimizer,
            "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1),
        }


def main(run: Any) -> Classifier:
    model = Classifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
