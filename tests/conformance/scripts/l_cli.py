"""LightningCLI: model, data and trainer from arguments (a YAML config cannot pass a loss)."""

from __future__ import annotations

import sys
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.cli import LightningCLI
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 200


class DigitsData(pl.LightningDataModule):
    def __init__(self, batch_size: int = 20) -> None:
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self) -> DataLoader:
        return DataLoader(digits(0, SIZE), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(digits(SIZE, 260), batch_size=self.batch_size)


def main(run: Any) -> DigitsClassifier:
    # As launched: python train.py fit --trainer.max_epochs=2 --model.hidden=16 ...
    argv = [
        "train.py",
        "fit",
        "--trainer.max_epochs=2",
        "--model.hidden=16",
        "--data.batch_size=25",
    ]
    launched, sys.argv = sys.argv, argv
    try:
        cli = LightningCLI(
            DigitsClassifier,
            DigitsData,
            trainer_defaults=lightning_options(callbacks=run.callbacks()),
            save_config_callback=None,
            seed_everything_default=0,
        )
    finally:
        sys.argv = launched
    model: DigitsClassifier = cli.model
    return model
