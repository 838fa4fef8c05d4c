"""A loader's own random state: found, captured, restored and preserved."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    RandomSampler,
    Sampler,
)

from onthefly.sessions import loader_rng

DATA = list(range(20))


class OwnSampler(Sampler[int]):
    """A custom sampler that keeps its generator under the conventional attribute."""

    def __init__(self, n: int, seed: int) -> None:
        self.n = n
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.n, generator=self.generator).tolist())

    def __len__(self) -> int:
        return self.n


def orders(loader: DataLoader[Any], epochs: int = 2) -> list[list[int]]:
    return [torch.cat(list(loader)).tolist() for _ in range(epochs)]


def test_every_generator_a_loader_draws_from_is_found_once() -> None:
    g = torch.Generator().manual_seed(1)
    assert loader_rng.generators(DataLoader(DATA, shuffle=True, generator=g)) == [g]
    sampler = RandomSampler(DATA, generator=torch.Generator().manual_seed(2))
    batches = BatchSampler(sampler, batch_size=4, drop_last=False)
    loader = DataLoader(DATA, batch_sampler=batches, generator=g)
    assert loader_rng.generators(loader) == [g, sampler.generator]
    custom = OwnSampler(20, 3)
    assert loader_rng.generators(DataLoader(DATA, sampler=custom)) == [custom.generator]
    assert loader_rng.generators(DataLoader(DATA, shuffle=True)) == []
    assert loader_rng.own_state([1, 2, 3]) is None  # any iterable is fine


def test_a_restored_state_replays_the_same_orders() -> None:
    loaders = [
        DataLoader(DATA, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(1)),
        DataLoader(DATA, batch_size=4, sampler=OwnSampler(20, 3)),
        DataLoader(DATA, batch_size=4, shuffle=True),  # the global generator
    ]
    for loader in loaders:
        orders(loader, 1)  # move every generator somewhere
        state = loader_rng.capture(loader)
        expected = orders(loader)
        torch.manual_seed(1234)
        orders(loader, 3)  # and further
        loader_rng.restore(loader, state)
        assert orders(loader) == expected


def test_a_distributed_sampler_gets_its_epoch_and_seed_back() -> None:
    sampler = DistributedSampler(DATA, num_replicas=2, rank=0, seed=5)
    loader = DataLoader(DATA, batch_size=4, sampler=sampler)
    sampler.set_epoch(3)
    state = loader_rng.capture(loader)
    expected = orders(loader, 1)
    sampler.set_epoch(0)
    sampler.seed = 0
    loader_rng.restore(loader, state)
    assert (sampler.epoch, sampler.seed) == (3, 5)
    assert orders(loader, 1) == expected


def test_preserved_leaves_every_generator_as_it_was() -> None:
    g = torch.Generator().manual_seed(1)
    loader = DataLoader(DATA, batch_size=4, shuffle=True, generator=g)
    torch.manual_seed(0)
    expected_global, expected_order = torch.rand(3), orders(loader, 1)
    torch.manual_seed(0)
    g.manual_seed(1)
    with loader_rng.preserved([loader, None, "not a loader"]):
        orders(loader, 2)
        torch.rand(10)
    assert torch.equal(torch.rand(3), expected_global)
    assert orders(loader, 1) == expected_order


def test_a_loader_built_otherwise_is_restored_as_far_as_it_matches(caplog: Any) -> None:
    one = DataLoader(DATA, shuffle=True, generator=torch.Generator().manual_seed(1))
    state = loader_rng.own_state(one)
    loader_rng.restore_own(DataLoader(DATA, shuffle=True), state)
    assert "not built as in the exported run" in caplog.text
