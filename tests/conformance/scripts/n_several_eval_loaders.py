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
    validation = [
        DataLoader(digits(SIZE, 280), batch_size=20),
        DataLoader(digits(280, 320), batch_size=8),
    ]
    tests = {
        "first": DataLoader(digits(SIZE, 300), batch_size=30),
        "rest": DataLoader(digits(300, 320), batch_size=20),
    }
    metrics = {"acc": torchmetrics.classification.MulticlassAccuracy(10, validate_args=False)}
    options = run.native()
    trainer = onthefly.Trainer(
        "digits", max_epochs=2, val_every_n_epochs=1, metrics=metrics, **options
    )
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=DataLoader(digits(0, SIZE), batch_size=24, shuffle=True),
        val_loader=validation,
        test_loader=tests,
        scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0),
    )
    trainer.run_test()
    return model
