"""A plain function as the loss (``F.smooth_l1_loss`` wrapped in a lambda) and clipping."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import regression

SIZE = 96


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))
    trainer = onthefly.Trainer(project="fn", max_epochs=2, grad_clip_norm=1.0, **run.native())
    trainer.fit(
        model,
        torch.optim.Adam(model.parameters(), lr=1e-2),
        lambda preds, target: F.smooth_l1_loss(preds, target, beta=0.5),
        DataLoader(regression(SIZE), batch_size=16, shuffle=True),
    )
    return model
