"""An autoencoder fed by a LightningDataModule, its loss F.mse_loss(x_hat, x)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 200


class Digits(pl.LightningDataModule):
    def __init__(self, batch_size: int = 25) -> None:
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str) -> None:
        self.train, self.val = digits(0, SIZE), digits(SIZE, 260)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=self.batch_size)


class AutoEncoder(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 4))
        self.decoder = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 64))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, _ = batch
        loss = F.mse_loss(self.decoder(self.encoder(x)), x)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, _ = batch
        self.log("val_loss", F.mse_loss(self.decoder(self.encoder(x)), x))

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def main(run: Any) -> AutoEncoder:
    model = AutoEncoder()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    trainer.fit(model, datamodule=Digits())
    return model
