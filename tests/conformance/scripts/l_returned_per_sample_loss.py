"""A custom loss (a focal loss) whose step returns ``per_sample_loss`` itself."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

SIZE = 240


def focal(logits: torch.Tensor, target: torch.Tensor, gamma: float = 2.0) -> torch.Tensor:
    log_p = logits.log_softmax(1).gather(1, target[:, None]).squeeze(1)
    return -((1 - log_p.exp()) ** gamma) * log_p


class Classifier(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        x, y = batch
        per_sample = focal(self.net(x), y)
        return {"loss": per_sample.mean(), "per_sample_loss": per_sample.detach()}

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def main(run: Any) -> Classifier:
    model = Classifier()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    trainer.fit(model, DataLoader(digits(0, SIZE), batch_size=24, shuffle=True))
    return model
