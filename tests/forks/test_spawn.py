"""Making a fork: the subset loader, the model copy, the fork's optimizer, the guards."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

from onthefly.errors import ConfigurationError
from onthefly.forks.adapters import add_adapters
from onthefly.forks.spawn import (
    Budget,
    check_indices,
    fork_optimizer,
    model_copy,
    parent_untouched,
    subset_loader,
    training_data,
)
from onthefly.samples.slot import Slot, arm, armed_slot
from onthefly.sessions.data_position import TrackedLoader
from tests.loaders import collate, configured_loader, init_worker


def _data(n: int = 20) -> TensorDataset:
    return TensorDataset(torch.arange(n, dtype=torch.float32).reshape(n, 1), torch.arange(n))


def test_the_subset_loader_keeps_the_parent_loaders_settings() -> None:
    parent = configured_loader(_data())
    loader = subset_loader(parent, [4, 2, 9, 11])
    assert list(loader.dataset.indices) == [4, 2, 9, 11]  # type: ignore[attr-defined]
    assert loader.dataset.dataset is parent.dataset  # type: ignore[attr-defined]
    assert (loader.batch_size, loader.num_workers, loader.drop_last) == (3, 2, True)
    assert loader.collate_fn is collate and loader.worker_init_fn is init_worker
    assert (loader.pin_memory, loader.timeout, loader.prefetch_factor) == (True, 7, 3)
    assert isinstance(loader.sampler, torch.utils.data.RandomSampler)
    assert not loader.persistent_workers  # a fork's workers end with the fork
    smaller = subset_loader(parent, [1, 2, 3], batch_size=2, drop_last=False, shuffle=False)
    assert (smaller.batch_size, smaller.drop_last) == (2, False)
    assert isinstance(smaller.sampler, torch.utils.data.SequentialSampler)


def test_a_slice_smaller_than_a_batch_with_drop_last_is_refused() -> None:
    parent = DataLoader(_data(), batch_size=8, drop_last=True)
    with pytest.raises(ConfigurationError, match="has 2 samples, fewer than one batch of 8"):
        subset_loader(parent, [1, 2])


def test_the_fork_shuffles_with_a_copy_of_the_parent_loaders_generator() -> None:
    generator = torch.Generator().manual_seed(5)
    parent = DataLoader(_data(), batch_size=20, shuffle=True, generator=generator)
    state = generator.get_state()
    loader = subset_loader(parent, list(range(20)))
    first = next(iter(loader))[1].tolist()
    assert torch.equal(generator.get_state(), state)  # the parent's generator did not move
    assert first == next(iter(parent))[1].tolist()  # same draws as the parent would make
    assert sorted(first) == list(range(20)) and first != list(range(20))


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_rank_s_share_becomes_a_slice_of_the_whole_dataset(shuffle: bool) -> None:
    data = _data()
    sampler = DistributedSampler(data, num_replicas=2, rank=1, shuffle=shuffle)
    parent = DataLoader(data, batch_size=4, sampler=sampler)
    loader = subset_loader(parent, [0, 1, 18, 19])  # indices of the whole dataset
    expected = torch.utils.data.RandomSampler if shuffle else torch.utils.data.SequentialSampler
    assert type(loader.sampler) is expected  # no DistributedSampler: rank 0 trains it all
    assert sorted(next(iter(loader))[1].tolist()) == [0, 1, 18, 19]


def test_indices_are_checked_against_the_dataset() -> None:
    assert check_indices([3, 0, 19], 20) == [3, 0, 19]
    with pytest.raises(ConfigurationError, match=r"indices \[20, -1\] are out of range"):
        check_indices([1, 20, -1], 20)
    with pytest.raises(ConfigurationError, match="the slice is empty"):
        check_indices([], 20)


class _Stream(IterableDataset[Any]):
    def __iter__(self) -> Any:
        yield from range(3)


def test_the_training_data_must_be_a_map_style_dataloader() -> None:
    loader = DataLoader(_data())
    assert training_data(TrackedLoader(loader)) is loader  # OnTheFly's wrapper is looked through
    with pytest.raises(ConfigurationError, match="over a map-style dataset"):
        training_data(DataLoader(_Stream()))
    with pytest.raises(ConfigurationError, match="got list"):
        training_data([1, 2])
    with pytest.raises(ConfigurationError, match="no training loader"):
        training_data(None)


def test_a_budget_counts_the_steps_it_makes() -> None:
    loader = DataLoader(_data(), batch_size=3)  # 7 batches
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
