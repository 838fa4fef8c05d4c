"""The loss as a module attribute (``self.criterion``), label smoothing, SGD with momentum."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 240


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
        self.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = self.criterion(self(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", self.criterion(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def main(run: Any) -> Classifier:
    model = Classifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
