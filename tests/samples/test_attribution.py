"""The recorded index lists match the batches a real DataLoader yields, whatever the sampler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
)

from onthefly.samples.attribution import Counter, SamplerTaps, ids_from_batch


class Indices(Dataset[torch.Tensor]):
    """Each sample is its own index, so a batch shows which indices it holds."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(i)


class Reversed(Sampler[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.n - 1, -1, -1))

    def __len__(self) -> int:
        return self.n


def _epochs(loader: DataLoader[Any], epochs: int = 2) -> None:
    taps = SamplerTaps()
    assert taps.install(loader)
    try:
        for _ in range(epochs):
            for batch in loader:
                item = taps.pop()  # a bare index when the loader does not batch
                assert ([item] if isinstance(item, int) else list(item)) == batch.reshape(
                    -1
                ).tolist()
            assert taps.pop() is None
    finally:
        taps.remove()


def _workers() -> dict[str, Any]:
    return {"num_workers": 2, "multiprocessing_context": "fork"}


@pytest.mark.parametrize(
    "make",
    [
        lambda ds: DataLoader(ds, batch_size=7, shuffle=True),
        lambda ds: DataLoader(ds, batch_size=7, shuffle=True, **_workers()),
        lambda ds: DataLoader(
            ds, batch_size=7, shuffle=True, persistent_workers=True, **_workers()
        ),
        lambda ds: DataLoader(ds, batch_size=5, sampler=Reversed(len(ds))),
        lambda ds: DataLoader(ds, batch_sampler=BatchSampler(RandomSampler(ds), 6, False)),
        lambda ds: DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, 2, rank=0)),
        lambda ds: DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds, 2, rank=1)),
        lambda ds: DataLoader(ds, batch_size=None, shuffle=True),
    ],
    ids=["shuffle", "workers", "persistent", "sampler", "batch_sampler", "dist0", "dist1", "none"],
)
def test_each_batch_gets_the_indices_it_holds(make: Any) -> None:
    _epochs(make(Indices(45)))


def test_an_epoch_cut_short_leaves_nothing_stale() -> None:
    loader = DataLoader(Indices(40), batch_size=4, shuffle=True, **_workers())
    taps = SamplerTaps()
    taps.install(loader)
    try:
        iterator = iter(loader)
        next(iterator)
        taps.pop()  # the workers prefetched more lists than were consumed
        del iterator
        for batch in loader:
            assert list(taps.pop()) == batch.tolist()
    finally:
        taps.remove()


def test_removal_restores_the_sampler_and_stops_recording() -> None:
    loader = DataLoader(Indices(10), batch_size=3, shuffle=True)
    sampler = loader.batch_sampler
    original = type(sampler)
    taps = SamplerTaps()
    taps.install(loader)
    assert isinstance(sampler, original) and type(sampler) is not original
    taps.remove()
    assert type(sampler) is original
    list(loader)
    assert taps.pop() is None


class Stream(IterableDataset[dict[str, Any]]):
    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(10):
            yield {"x": torch.tensor(float(i)), "idx": 100 + i}


def test_iterable_data_has_no_sampler_but_ids_from_its_batch_key() -> None:
    loader = DataLoader(Stream(), batch_size=4)
    assert not SamplerTaps().install(loader)
    batches = list(loader)
    assert ids_from_batch(batches[0], 4).tolist() == [100, 101, 102, 103]  # type: ignore[union-attr]
    assert ids_from_batch({"index": [1, 2]}, 2).tolist() == [1, 2]  # type: ignore[union-attr]
    assert ids_from_batch({"idx": torch.tensor([1.5, 2.0])}, 2) is None
    assert ids_from_batch((torch.zeros(2), torch.zeros(2)), 2) is None


def test_the_counter_numbers_samples_in_arrival_order() -> None:
    counter = Counter()
    assert list(counter.take(3)) == [0, 1, 2]
    assert list(counter.take(2)) == [3, 4]
