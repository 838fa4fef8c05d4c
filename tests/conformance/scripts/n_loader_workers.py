"""A DataLoader with two worker processes, shuffled with its own generator."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 240


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    loader = DataLoader(
        digits(0, SIZE),
        batch_size=24,
        shuffle=True,
        num_workers=2,
        generator=torch.Generator().manual_seed(7),
    )
    trainer = onthefly.Trainer(project="workers", max_epochs=2, **run.native())
    trainer.fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss(), loader)
    return model
