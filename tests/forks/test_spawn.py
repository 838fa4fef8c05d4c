"""Making a fork: the subset loader, the model copy, the fork's optimizer, the guards."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from onthefly.errors import ConfigurationError
from onthefly.forks.adapters import add_adapters
from onthefly.forks.spawn import Budget, fork_optimizer, model_copy, parent_untouched
from onthefly.samples.slot import Slot, arm, armed_slot


def test_a_budget_counts_the_steps_it_makes() -> None:
    loader = DataLoader(TensorDataset(torch.zeros(20, 1)), batch_size=3)  # 7 batches
    assert Budget(steps=5).total(loader) == 5 and Budget(steps=5).to_json() == {"steps": 5}
    assert Budget(epochs=2).total(loader) == 14 and Budget(epochs=2).to_json() == {"epochs": 2}
    assert Budget(epochs=2).total(loader, accumulate=2) == 8


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def _trained_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    optimizer = torch.optim.AdamW(
        [{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 0.5}],
        lr=0.1,
        weight_decay=0.3,
    )
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    return optimizer


def test_a_model_copy_is_independent_and_has_no_gradients() -> None:
    model = _model()
    model(torch.ones(1, 3)).sum().backward()
    twin = model_copy(model)
    assert all(p.grad is None for p in twin.parameters())
    with torch.no_grad():
        next(twin.parameters()).add_(1.0)
    assert not torch.equal(next(twin.parameters()), next(model.parameters()))
    assert all(p.grad is not None for p in model.parameters())


def test_a_fresh_optimizer_has_the_parents_groups_and_no_state() -> None:
    model = _model()
    parent = _trained_optimizer(model)
    twin = model_copy(model)
    fresh = fork_optimizer(parent, model, twin, "fresh")
    assert type(fresh) is torch.optim.AdamW and not fresh.state
    assert [g["lr"] for g in fresh.param_groups] == [0.1, 0.5]
    assert fresh.param_groups[0]["weight_decay"] == 0.3
    assert fresh.param_groups[1]["params"] == list(twin[2].parameters())
    faster = fork_optimizer(parent, model, twin, "fresh", lr=0.01)
    assert [g["lr"] for g in faster.param_groups] == [0.01, 0.01]


def test_a_cloned_optimizer_copies_the_state_without_sharing_it() -> None:
    model = _model()
    parent = _trained_optimizer(model)
    saved = {
        k: {n: t.clone() for n, t in v.items()} for k, v in parent.state_dict()["state"].items()
    }
    twin = model_copy(model)
    clone = fork_optimizer(parent, model, twin, "clone")
    twin(torch.ones(2, 3)).sum().backward()
    clone.step()
    clone.step()
    for key, values in parent.state_dict()["state"].items():  # the parent's state is as it was
        for name, tensor in values.items():
            assert torch.equal(tensor, saved[key][name])
    assert int(clone.state_dict()["state"][0]["step"]) == 3


def test_adapter_forks_train_one_group_of_adapters() -> None:
    model = _model()
    parent = _trained_optimizer(model)
    twin = model_copy(model)
    adapters = add_adapters(twin, rank=1)
    optimizer = fork_optimizer(parent, model, twin, "fresh", params=adapters)
    (group,) = optimizer.param_groups
    assert group["params"] == adapters and group["lr"] == 0.1


def test_an_optimizer_over_foreign_parameters_is_refused() -> None:
    model = _model()
    stray = nn.Parameter(torch.zeros(1))
    parent = torch.optim.SGD([*model.parameters(), stray], lr=0.1)
    with pytest.raises(ConfigurationError, match="parameters that are not the model's"):
        fork_optimizer(parent, model, model_copy(model), "fresh")


def test_parent_untouched_restores_every_generator_the_slot_and_grad_mode() -> None:
    slot = Slot(4)
    arm(slot)
    states = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    try:
        with parent_untouched():
            assert armed_slot() is None
            torch.set_grad_enabled(False)
            torch.rand(3), np.random.rand(3), random.random()
        assert torch.is_grad_enabled() and armed_slot() is slot
        assert torch.equal(torch.get_rng_state(), states[0])
        assert np.array_equal(np.random.get_state()[1], states[1])
        assert random.getstate() == states[2]
    finally:
        arm(None)
