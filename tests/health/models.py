"""Small models with planted problems, shared by the health check tests."""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from onthefly.health import Probe


def data(n: int = 64, features: int = 8, seed: int = 0) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    return TensorDataset(x, (x[:, 0] > 0).long())


def loader(n: int = 64, batch_size: int = 8, seed: int = 0) -> DataLoader:
    return DataLoader(data(n, seed=seed), batch_size=batch_size)


def healthy(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


class Noisy(nn.Module):
    """Adds noise from a generator of its own: not restored by anything, differs per call."""

    def __init__(self) -> None:
        super().__init__()
        self.generator = torch.Generator().manual_seed(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 0.01 * torch.rand(x.shape, generator=self.generator)


def nondeterministic(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), Noisy(), nn.ReLU(), nn.Linear(16, 2))


def with_dropout(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.5), nn.Linear(16, 2))


def dead(seed: int = 0) -> nn.Module:
    """A ReLU after a huge negative bias: every unit of ``1`` is dead."""
    model = healthy(seed)
    with torch.no_grad():
        model[0].bias.fill_(-100.0)
    return model


def exploding(seed: int = 0) -> nn.Module:
    """Weights scaled up 30x per layer: outputs and gradients blow up."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 32), nn.Linear(32, 2))
    with torch.no_grad():
        for layer in (model[2], model[3]):
            layer.weight.mul_(30.0)
    return model


def mse_on_logits(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss whose gradient grows with the output (unlike cross-entropy)."""
    return F.mse_loss(output, F.one_hot(target, 2).float())


class SlowDataset(Dataset[Any]):
    """Sleeps in ``__getitem__``: the data loader is the bottleneck."""

    def __init__(self, delay: float = 0.002) -> None:
        self.inner = data()
        self.delay = delay

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.delay)
        return self.inner[index]


def probe_of(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    loss_fn: Any = F.cross_entropy,
) -> Probe:
    """A probe of ``model`` on the first batch of :func:`loader`."""
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.1)
    batch = next(iter(loader()))

    def compute(b: Any) -> torch.Tensor:
        loss: torch.Tensor = loss_fn(model(b[0]), b[1])
        return loss

    return Probe(model, [optimizer], batch, compute)
