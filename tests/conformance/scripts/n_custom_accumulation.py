"""A custom step accumulating gradients over 3 batches (10 per epoch: a short last window)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 240
ACCUMULATE = 3


def main(run: Any) -> nn.Module:
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    loader = DataLoader(digits(0, SIZE), batch_size=24, shuffle=True)
    trainer = onthefly.Trainer(project="accumulate", max_epochs=2, **run.native())

    @trainer.training_step
    def step(batch: Any, state: Any) -> dict[str, torch.Tensor]:
        x, y = batch
        loss = F.cross_entropy(state.model(x), y)
        state.backward(loss / ACCUMULATE)
        last = state.batch_idx + 1 == len(loader)
        if (state.batch_idx + 1) % ACCUMULATE == 0 or last:
            state.optimizer.step()
            state.optimizer.zero_grad()
        return {"loss": loss}

    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.1), None, loader)
    return model
