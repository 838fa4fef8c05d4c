"""Replay and oversampling loaders: the share of rest batches, full batches, exact shares."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from onthefly.errors import ConfigurationError
from onthefly.forks.mixing import ReplaySampler, oversample_loader, replay_loader

SLICE = list(range(10))
REST = list(range(10, 100))


def _batches(sampler: ReplaySampler) -> list[list[int]]:
    flat = list(sampler)
    size = sampler.batch_size
    return [flat[i : i + size] for i in range(0, len(flat), size)]


@pytest.mark.parametrize(("replay", "rest_batches"), [(0.0, 0), (0.5, 3), (0.25, 1), (0.75, 9)])
def test_replay_mixes_that_share_of_whole_rest_batches_evenly(
    replay: float, rest_batches: int
) -> None:
    sampler = ReplaySampler(SLICE, REST, 4, replay, torch.Generator().manual_seed(0))
    batches = _batches(sampler)
    assert all(len(b) == 4 for b in batches)
    kinds = ["rest" if b[0] >= 10 else "slice" for b in batches]
    for batch, kind in zip(batches, kinds, strict=True):  # every batch from one source
        assert all((i >= 10) == (kind == "rest") for i in batch)
    assert kinds.count("slice") == 3  # ceil(10 / 4): one pass over the slice per epoch
    assert kinds.count("rest") == rest_batches == len(sampler) // 4 - 3
    assert set().union(*[b for b, k in zip(batches, kinds, strict=True) if k == "slice"]) == set(
        SLICE
    )
    if replay == 0.5:  # spread evenly, never two rest batches in a row
        assert "rest,rest" not in ",".join(kinds)


def test_replay_is_the_same_for_the_same_generator_and_refuses_bad_shares() -> None:
    first = list(ReplaySampler(SLICE, REST, 4, 0.5, torch.Generator().manual_seed(3)))
    again = list(ReplaySampler(SLICE, REST, 4, 0.5, torch.Generator().manual_seed(3)))
    assert first == again
    with pytest.raises(ConfigurationError, match=r"expected a share of batches in \[0, 1\)"):
        ReplaySampler(SLICE, REST, 4, 1.0)
    with pytest.raises(ConfigurationError, match="outside the slice"):
        ReplaySampler(SLICE, [], 4, 0.5)


def _parent(shuffle: bool = True) -> DataLoader:
    data = TensorDataset(torch.arange(100.0).reshape(100, 1), torch.zeros(100))
    return DataLoader(data, batch_size=8, shuffle=shuffle, generator=torch.Generator())


def test_a_replay_loader_reads_the_parents_dataset_and_leaves_its_generator() -> None:
    parent = _parent()
    state = parent.generator.get_state()
    loader = replay_loader(parent, SLICE, 0.5, batch_size=5)
    batches = [x.flatten().long().tolist() for x, _ in loader]
    assert len(batches) == len(loader) == 4  # two slice batches, two of the rest
    assert sum(all(i < 10 for i in b) for b in batches) == 2
    assert torch.equal(parent.generator.get_state(), state)


def test_oversampling_draws_the_slice_at_its_share() -> None:
    torch.manual_seed(0)
    loader = oversample_loader(_parent(), SLICE, share=0.5)
    drawn = torch.cat([x.flatten() for _ in range(20) for x, _ in loader])
    assert len(drawn) == 20 * 100
    assert (drawn < 10).float().mean().item() == pytest.approx(0.5, abs=0.04)
    for bad in ({"share": 1.0}, {"share": 0.0}):
        with pytest.raises(ConfigurationError, match="expected a share in"):
            oversample_loader(_parent(), SLICE, **bad)
    with pytest.raises(ConfigurationError, match="neither empty nor the whole"):
        oversample_loader(_parent(), list(range(100)))
