from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader

from onthefly.samples.attribution import SamplerTaps
from onthefly.sessions import rng
from onthefly.sessions.data_position import Resume, TrackedLoader


@pytest.mark.parametrize("workers", [0, 2])
def test_a_resumed_epoch_keeps_the_sample_attribution_in_step(workers: int) -> None:
    torch.manual_seed(0)
    data: Any = list(range(40))  # a list is a map-style dataset to DataLoader
    loader: DataLoader[int] = DataLoader(data, batch_size=4, shuffle=True, num_workers=workers)
    tracked = TrackedLoader(loader)
    taps = SamplerTaps()
    assert taps.install(loader)
    try:
        batches = iter(tracked)
        for _ in range(3):
            next(batches)
            taps.pop()
        position = tracked.position(consumed=3)
        expected = next(batches).tolist()
        del batches
        tracked.arm(Resume(position, rng.capture()))
        resumed = iter(tracked)
        batch = next(resumed).tolist()
        assert batch == expected
        assert list(taps.pop()) == batch  # not the indices of a skipped batch
        following = next(resumed).tolist()
        assert list(taps.pop()) == following
        del resumed
    finally:
        taps.remove()


class _Noisy(torch.utils.data.Dataset[torch.Tensor]):
    """Draws from the global RNG while loading, like a random augmentation."""

    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> torch.Tensor:
        return i + torch.rand(())


def test_a_fetch_keeps_its_rng_state_only_when_it_may_be_replayed() -> None:
    torch.manual_seed(0)
    tracked = TrackedLoader(DataLoader(_Noisy(), batch_size=4, shuffle=True))
    batches = iter(tracked)
    next(batches)
    batches.trained = 0
    ahead = next(batches)  # fetched before batch 0 was trained (prefetching): replayable
    position = tracked.position(consumed=1)
    assert len(position.pending_rng) == 1
    batches.trained = 2
    next(batches)  # fetched right when it is due: trained before any export
    assert tracked.position(consumed=3).pending_rng == []
    tracked.arm(Resume(position, rng.capture()))
    assert torch.equal(next(iter(tracked)), ahead)  # the same random draws


def test_an_expected_export_keeps_the_state_of_a_fetch_not_yet_trained() -> None:
    torch.manual_seed(0)
    tracked = TrackedLoader(DataLoader(_Noisy(), batch_size=4, shuffle=True))
    tracked.watch = lambda: True
    batches = iter(tracked)
    batches.trained = 0
    first = next(batches)
    position = tracked.position(consumed=0)
    assert len(position.pending_rng) == 1
    tracked.arm(Resume(position, rng.capture()))
    assert torch.equal(next(iter(tracked)), first)  # the same random draws
