"""What a fetch keeps of the RNG: the states of the generators its loader's fetches draw from."""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from onthefly.sessions import rng
from onthefly.sessions.data_position import Resume, TrackedLoader
from onthefly.sessions.fetch_draws import CHECK_EVERY, LEARN, FetchDraws
from tests.sessions.training import Losses, Noisy, lightning_run


def _prefetched_states(loader: DataLoader[Any], fetches: int) -> list[set[str]]:
    """The generators each fetch keeps when every fetch runs ahead of training (as in
    Lightning)."""
    tracked = TrackedLoader(loader)
    batches = iter(tracked)
    kept = []
    for _ in range(fetches):
        batches.trained = batches.fetched - 1  # the fetch runs one batch ahead
        next(batches)
        state = tracked.position(consumed=batches.fetched - 1).pending_rng[-1]
        kept.append(set(state) & rng.GLOBAL)
    return kept


@pytest.mark.parametrize(
    ("noise", "drawn"),
    [("torch", {"torch"}), ("numpy", {"numpy"}), ("python", {"python"}), ("none", set())],
)
def test_after_the_first_fetches_only_the_generators_seen_drawing_are_kept(
    noise: Any, drawn: set[str]
) -> None:
    torch.manual_seed(0)
    fetches = CHECK_EVERY + 6
    kept = _prefetched_states(DataLoader(Noisy(n=8 * fetches, noise=noise), batch_size=8), fetches)
    watched = [0, *range(1, LEARN + 1), CHECK_EVERY]  # the epoch's first, the learning, a check
    assert [n for n, state in enumerate(kept) if state == rng.GLOBAL] == watched
    assert all(state == drawn for n, state in enumerate(kept) if n not in watched)


class _LateDraws(Dataset[torch.Tensor]):
    """Draws from Python's generator only from sample ``start`` on."""

    def __init__(self, start: int) -> None:
        self.start = start

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(float(i) + (random.random() if i >= self.start else 0.0))


def test_a_draw_seen_only_later_is_kept_from_then_on_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loader = DataLoader(_LateDraws(start=4 * 20), batch_size=4)
    draws = FetchDraws()
    batches = iter(loader)
    kept = []
    with caplog.at_level(logging.WARNING, logger="onthefly.sessions.fetch_draws"):
        for _ in range(CHECK_EVERY + 3):
            kept.append(set(draws.before(loader, first=False)) & rng.GLOBAL)
            next(batches)
            draws.after()
    assert kept[LEARN : CHECK_EVERY - 1] == [set()] * (CHECK_EVERY - 1 - LEARN)
    assert kept[CHECK_EVERY:] == [{"python"}] * 3
    assert draws.drawn == {"python"}
    assert f"fetch {CHECK_EVERY} of the training data drew from the python" in caplog.text


@pytest.mark.parametrize("noise", ["torch", "numpy", "none"])
def test_a_fetch_kept_with_part_of_the_state_replays_with_the_same_draws(noise: Any) -> None:
    torch.manual_seed(0)
    data = Noisy(n=8 * 20, noise=noise)
    tracked = TrackedLoader(DataLoader(data, batch_size=8, shuffle=True))
    batches = iter(tracked)
    for _ in range(LEARN + 3):
        batches.trained = batches.fetched - 1
        ahead = next(batches)
    position = tracked.position(consumed=batches.fetched - 1)
    assert set(position.pending_rng[-1]) & rng.GLOBAL != rng.GLOBAL
    tracked.arm(Resume(position, rng.capture()))
    assert torch.equal(next(iter(tracked))[0], ahead[0])


@pytest.mark.parametrize("noise", ["numpy", "python", "none"])
def test_lightning_resumes_exactly_whatever_generator_loading_draws_from(
    noise: Any, tmp_path: Path
) -> None:
    steps, export_at = 15, 11  # past the first fetches, in the middle of epoch 1
    path = tmp_path / "mid.otf"
    full = lightning_run(steps, noise=noise).losses
    first = lightning_run(export_at, losses=Losses(export_at=export_at, path=path), noise=noise)
    rest = lightning_run(steps, resume_from=path, noise=noise).losses
    assert first.losses + rest == full
