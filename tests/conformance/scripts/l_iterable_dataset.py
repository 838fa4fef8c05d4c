"""An IterableDataset streaming samples with their own ``idx``, as a webdataset-style reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, IterableDataset

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 200


class Stream(IterableDataset[dict[str, Any]]):
    def __iter__(self) -> Iterator[dict[str, Any]]:
        data = digits(0, SIZE)
        for i in range(SIZE):
            x, y = data[i]
            yield {"x": x, "y": y, "idx": i}


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(64, 10)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        loss = F.cross_entropy(self.net(batch["x"]), batch["y"])
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.5)


def main(run: Any) -> Classifier:
    model = Classifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    trainer.fit(model, DataLoader(Stream(), batch_size=32))
    return model
