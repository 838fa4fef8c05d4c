"""A model returning ``{"logits", "features"}``: the default step takes the logits."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 240


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 24), nn.GELU())
        self.head = nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.body(x)
        return {"logits": self.head(features), "features": features}


def main(run: Any) -> Net:
    model = Net()
    trainer = onthefly.Trainer(project="dict", max_epochs=2, val_every_n_epochs=1, **run.native())
    trainer.fit(
        model,
        torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01),
        nn.CrossEntropyLoss(),
        DataLoader(digits(0, SIZE), batch_size=24, shuffle=True),
        DataLoader(digits(SIZE, 320), batch_size=40),
    )
    return model
