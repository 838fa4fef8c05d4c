"""``{"image", "label"}`` batches (torchvision-style wrappers), a small CNN, label smoothing."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 200


class Images(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, start: int, stop: int) -> None:
        self.base = digits(start, stop)

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        x, y = self.base[i]
        return {"image": x.reshape(1, 8, 8), "label": y}


def main(run: Any) -> nn.Module:
    model = nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10)
    )
    trainer = onthefly.Trainer(project="cnn", max_epochs=2, val_every_n_epochs=1, **run.native())
    trainer.fit(
        model,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        nn.CrossEntropyLoss(label_smoothing=0.05),
        DataLoader(Images(0, SIZE), batch_size=20, shuffle=True),
        DataLoader(Images(SIZE, 260), batch_size=20),
    )
    return model
