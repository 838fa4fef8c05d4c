"""OneCycleLR stepped after every optimizer step (scheduler_interval="step")."""

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
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=0.5, total_steps=2 * len(loader)
    )
    trainer = onthefly.Trainer(project="onecycle", max_epochs=2, **run.native())
    trainer.fit(
        model,
        optimizer,
        nn.CrossEntropyLoss(),
        loader,
        scheduler=scheduler,
        scheduler_interval="step",
    )
    return model
