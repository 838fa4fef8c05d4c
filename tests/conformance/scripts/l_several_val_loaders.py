"""Two validation loaders: Lightning logs val_loss/dataloader_idx_0 and _1."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 240


def main(run: Any) -> DigitsClassifier:
    model = DigitsClassifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    val = [DataLoader(digits(SIZE, 280), batch_size=20), DataLoader(digits(280, 320), batch_size=8)]
    trainer.fit(model, train, val)
    return model
