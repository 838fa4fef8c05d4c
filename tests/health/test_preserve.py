"""preserved(): the model, gradients, optimizer, modes and random state come back exactly."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.health.preserve import preserved
from tests.health.models import loader


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2)
    )


def _train_step(
    model: nn.Module, opt: torch.optim.Optimizer, batch: tuple[torch.Tensor, ...]
) -> torch.Tensor:
    opt.zero_grad()
    loss = F.cross_entropy(model(batch[0]), batch[1])
    loss.backward()
    opt.step()
    return loss.detach()


def _losses(probe_at: int | None) -> list[torch.Tensor]:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for i, batch in enumerate(loader()):
        losses.append(_train_step(model, opt, batch))
        if i == probe_at:
            with preserved(model, [opt]):
                model.eval()
                torch.set_grad_enabled(False)
                torch.rand(3), random.random(), np.random.rand()
                torch.set_grad_enabled(True)
                model.train()
                for _ in range(3):
                    _train_step(model, opt, batch)
                opt.param_groups[0]["lr"] = 5.0
    return losses


def test_training_after_a_preserved_probe_is_bit_identical() -> None:
    assert torch.equal(torch.stack(_losses(None)), torch.stack(_losses(2)))


def test_everything_is_restored_in_place() -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    batch = next(iter(loader()))
    _train_step(model, opt, batch)
    model[3].eval()
    weight, grad = model[0].weight, model[0].weight.grad
    before = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters()]
    exp_avg = opt.state[weight]["exp_avg"]
    exp_avg_before = exp_avg.clone()
    rng = torch.get_rng_state()
    py, npy = random.getstate(), np.random.get_state()
    with preserved(model, [opt]):
        model.train()
        for _ in range(2):
            _train_step(model, opt, batch)
        model[0].weight.grad = None
        torch.rand(5), random.random(), np.random.rand()
    assert model[0].weight is weight and model[0].weight.grad is grad
    assert opt.state[weight]["exp_avg"] is exp_avg and torch.equal(exp_avg, exp_avg_before)
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    for p, g in zip(model.parameters(), grads, strict=True):
        assert torch.equal(p.grad, g)
    assert model[0].training and not model[3].training
    assert torch.equal(torch.get_rng_state(), rng)
    assert random.getstate() == py and np.random.get_state()[1].tolist() == npy[1].tolist()


def test_state_created_by_the_probe_is_dropped() -> None:
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    batch = next(iter(loader()))
    with preserved(model, [opt]):
        _train_step(model, opt, batch)
    assert len(opt.state) == 0
    assert all(p.grad is None for p in model.parameters())
