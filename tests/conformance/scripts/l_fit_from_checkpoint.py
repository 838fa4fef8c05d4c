"""A second fit resumed from the first one's checkpoint (fit(ckpt_path=...))."""

from __future__ import annotations

import shutil
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 240


def loaders() -> tuple[DataLoader, DataLoader]:
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    return train, DataLoader(digits(SIZE, 320), batch_size=40)


def main(run: Any) -> DigitsClassifier:
    # The same folder in both runs, emptied first: Lightning's log lines name the path.
    folder = run.home / "ckpt"
    shutil.rmtree(folder, ignore_errors=True)
    first = pl.Trainer(
        **lightning_options(max_epochs=1, enable_checkpointing=True),
        callbacks=[ModelCheckpoint(dirpath=folder, filename="last")],
    )
    first.fit(DigitsClassifier(), *loaders())
    model = DigitsClassifier()
    again = ModelCheckpoint(dirpath=folder / "resumed", filename="last")
    options = lightning_options(max_epochs=3, enable_checkpointing=True)
    second = pl.Trainer(**options, callbacks=run.callbacks(again))
    second.fit(model, *loaders(), ckpt_path=str(folder / "last.ckpt"))
    return model
