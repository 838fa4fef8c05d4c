from __future__ import annotations

from types import SimpleNamespace
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
    tracked.watch = SimpleNamespace(waiting=True)  # e.g. a command waits
    batches = iter(tracked)
    batches.trained = 0
    first = next(batches)
    position = tracked.position(consumed=0)
    assert len(position.pending_rng) == 1
    tracked.arm(Resume(position, rng.capture()))
    assert torch.equal(next(iter(tracked)), first)  # the same random draws


class _OwnOrder(torch.utils.data.Sampler[int]):
    """A custom sampler drawing from its own generator (the ``generator`` convention)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.generator = torch.Generator().manual_seed(4)

    def __iter__(self) -> Any:
        return iter(torch.randperm(self.n, generator=self.generator).tolist())

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", ["loader", "custom sampler", "distributed"])
def test_a_mid_epoch_resume_restores_the_loader_s_own_state(kind: str, workers: int) -> None:
    data: Any = _Noisy()
    if kind == "loader":
        options: dict[str, Any] = {"shuffle": True, "generator": torch.Generator().manual_seed(3)}
    elif kind == "custom sampler":
        options = {"sampler": _OwnOrder(len(data))}
    else:
        options = {"sampler": torch.utils.data.DistributedSampler(data, 2, 1, seed=5)}
    loader = DataLoader(data, batch_size=4, num_workers=workers, **options)
    sampler_epoch = getattr(loader.sampler, "set_epoch", None)
    tracked = TrackedLoader(loader)
    torch.manual_seed(0)
    list(iter(tracked))  # an epoch moves the generators on
    if sampler_epoch is not None:
        sampler_epoch(1)
    batches = iter(tracked)
    first = [next(batches) for _ in range(3)]
    position, after = tracked.position(consumed=3), rng.capture()
    expected = [b.tolist() for b in batches]
    del first

    # As in another process: the generators elsewhere, the sampler at another epoch.
    torch.manual_seed(123)
    list(iter(loader))
    if sampler_epoch is not None:
        sampler_epoch(0)
    tracked.arm(Resume(position, after))
    assert [b.tolist() for b in iter(tracked)] == expected
