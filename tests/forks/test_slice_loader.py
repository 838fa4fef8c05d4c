"""A fork's data: a new loader over a slice, with the parent loader's settings."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, Subset, TensorDataset

from onthefly.errors import ConfigurationError
from onthefly.forks.slice_loader import (
    FoldedBatchSampler,
    batch_size_of,
    check_indices,
    order_of,
    subset_loader,
    training_data,
)
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
    assert isinstance(order_of(loader), torch.utils.data.RandomSampler)
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
    assert type(order_of(loader)) is expected  # no DistributedSampler: rank 0 trains it all
    assert sorted(next(iter(loader))[1].tolist()) == [0, 1, 18, 19]


def _batches(loader: DataLoader) -> list[list[int]]:
    return [labels.tolist() for _, labels in loader]


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_training_slice_folds_a_last_single_sample_into_the_batch_before(shuffle: bool) -> None:
    parent = DataLoader(_data(200), batch_size=64, shuffle=shuffle)
    indices = list(range(3, 196))  # 3 * 64 + 1 samples
    loader = subset_loader(parent, indices)
    batches = _batches(loader)
    assert [len(b) for b in batches] == [64, 64, 65] and len(loader) == 3
    assert sorted(i for b in batches for i in b) == indices  # every sample, once
    assert (batches[0] == indices[:64]) is not shuffle
    assert batch_size_of(loader) == 64 and not loader.persistent_workers


def test_the_folded_order_is_the_one_the_parent_generator_would_draw() -> None:
    parent = DataLoader(
        _data(), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(3)
    )
    indices = [1, 3, 5, 7, 9, 11, 13, 15, 17]  # 2 * 4 + 1 samples
    folded = [i for b in _batches(subset_loader(parent, indices)) for i in b]
    plain = DataLoader(
        Subset(parent.dataset, indices),
        batch_size=4,
        shuffle=True,
        generator=torch.Generator().manual_seed(3),
    )
    assert folded == [i for b in _batches(plain) for i in b]


def test_evaluation_slices_keep_their_batches_as_cut() -> None:
    parent = DataLoader(_data(200), batch_size=64)
    loader = subset_loader(parent, list(range(193)), shuffle=False, drop_last=False)
    assert [len(b) for b in _batches(loader)] == [64, 64, 64, 1] and len(loader) == 4
    dropping = subset_loader(DataLoader(_data(200), batch_size=64, drop_last=True), range(193))
    assert [len(b) for b in _batches(dropping)] == [64, 64, 64]


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 150), batch=st.integers(1, 40), shuffle=st.booleans())
def test_a_training_slice_has_no_single_sample_batch_unless_that_is_all(
    size: int, batch: int, shuffle: bool
) -> None:
    parent = DataLoader(_data(150), batch_size=batch, shuffle=shuffle)
    loader = subset_loader(parent, list(range(size)))
    lengths = [len(b) for b in _batches(loader)]
    assert sum(lengths) == size and len(lengths) == len(loader)
    assert all(n == batch for n in lengths[:-1]) and lengths[-1] <= batch + 1
    if size > 1 and batch > 1:
        assert 1 not in lengths


def test_the_folded_batch_sampler_keeps_a_lone_sample() -> None:
    assert list(FoldedBatchSampler(range(1), batch_size=4)) == [[0]]
    assert list(FoldedBatchSampler(range(3), batch_size=1)) == [[0], [1], [2]]
    assert len(FoldedBatchSampler(range(8), batch_size=4)) == 2


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
