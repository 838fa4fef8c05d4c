"""bf16 mixed precision on the CPU (autocast around the step)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 240


def main(run: Any) -> DigitsClassifier:
    model = DigitsClassifier()
    options = lightning_options(max_epochs=2, precision="bf16-mixed", callbacks=run.callbacks())
    trainer = pl.Trainer(**options)
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
