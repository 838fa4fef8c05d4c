"""validate, test and predict after fit, as a user checks a trained model."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options
from tests.conformance.scripts._modules import DigitsClassifier

SIZE = 240


def main(run: Any) -> DigitsClassifier:
    model = DigitsClassifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=1, callbacks=run.callbacks()))
    train = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer.fit(model, train, DataLoader(digits(SIZE, 320), batch_size=40))
    trainer.validate(model, DataLoader(digits(SIZE, 320), batch_size=40))
    trainer.test(model, DataLoader(digits(SIZE, 320), batch_size=40))
    trainer.predict(model, DataLoader(digits(SIZE, 320), batch_size=40))
    return model
