"""pytorch/examples' MNIST shape on digits: CrossEntropyLoss, Adadelta, StepLR, validation."""

from __future__ import annotations

from typing import Any

import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 240


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 32)
        self.dropout = nn.Dropout(0.25)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(torch.relu(self.fc1(x))))


def main(run: Any) -> Net:
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
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
        DataLoader(digits(0, SIZE), batch_size=32, shuffle=True),
        DataLoader(digits(SIZE, 320), batch_size=40),
        scheduler=scheduler,
    )
    return model
