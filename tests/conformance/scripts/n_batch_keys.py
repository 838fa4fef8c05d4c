"""Dict batches with keys of their own, named with ``Trainer(batch_keys=...)``, Huber loss."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import Keyed, regression

SIZE = 96


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
    trainer = onthefly.Trainer(
        project="keys", max_epochs=2, batch_keys=("features", "price"), **run.native()
    )
    trainer.fit(
        model,
        torch.optim.SGD(model.parameters(), lr=0.05),
        nn.HuberLoss(delta=0.5),
        DataLoader(Keyed(regression(SIZE), "features", "price"), batch_size=16, shuffle=True),
    )
    return model
