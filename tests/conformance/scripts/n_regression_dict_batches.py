"""Regression with MSELoss on ``{"x", "y"}`` dict batches and a held-out set."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import Keyed, regression

SIZE = 96


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    trainer = onthefly.Trainer(project="reg", max_epochs=3, val_every_n_epochs=1, **run.native())
    trainer.fit(
        model,
        torch.optim.SGD(model.parameters(), lr=0.05),
        nn.MSELoss(),
        DataLoader(Keyed(regression(SIZE), "x", "y"), batch_size=16, shuffle=True),
        DataLoader(Keyed(regression(32, seed=5), "x", "y"), batch_size=16),
    )
    return model
