"""Two validation loaders and two test loaders under onthefly.Trainer, as Lightning takes
them (a list; results named val_loss/dataloader_idx_0, _1), with a torchmetrics accuracy and
ReduceLROnPlateau stepped on the first loader's loss; two test loaders (a dict) after fit."""

from __future__ import annotations

from typing import Any

import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 240


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=10, validate_args=False)
    trainer = onthefly.Trainer(
        project="digits",
        max_epochs=2,
        val_every_n_epochs=1,
        metrics={"acc": accuracy},
        **run.native(),
    )
    trainer.fit(
        model,
        optimizer,
        nn.CrossEntropyLoss(),
        DataLoader(digits(0, SIZE), batch_size=24, shuffle=True),
        [DataLoader(digits(SIZE, 280), batch_size=20), DataLoader(digits(280, 320), batch_size=8)],
        {
            "first": DataLoader(digits(SIZE, 300), batch_size=30),
            "rest": DataLoader(digits(300, 320), batch_size=20),
        },
        scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0),
    )
    trainer.run_test()
    return model
