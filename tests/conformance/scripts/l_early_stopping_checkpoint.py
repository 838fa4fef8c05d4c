"""EarlyStopping on val_loss and ModelCheckpoint keeping the best two."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 240


def main(run: Any) -> DigitsClassifier:
    model = DigitsClassifier(lr=0.05)
    checkpoints = ModelCheckpoint(
        dirpath=run.home / f"ckpt-{run.onthefly}", monitor="val_loss", save_top_k=2
    )
    stopping = EarlyStopping(monitor="val_loss", patience=1, min_delta=0.05)
    options = lightning_options(max_epochs=6, enable_checkpointing=True)
    trainer = pl.Trainer(**options, callbacks=run.callbacks(checkpoints, stopping))
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
