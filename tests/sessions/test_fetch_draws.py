"""What a fetch keeps of the RNG: torch's state alone unless fetches draw from Python or NumPy."""

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


def _full(state: dict[str, Any]) -> bool:
    return "python" in state and "numpy" in state


def _prefetched_states(loader: DataLoader[Any], fetches: int) -> list[dict[str, Any]]:
    """The state each fetch keeps when every fetch runs ahead of training (as in Lightning)."""
    tracked = TrackedLoader(loader)
    batches = iter(tracked)
    states = []
    for _ in range(fetches):
        batches.trained = batches.fetched - 1  # the fetch runs one batch ahead
        next(batches)
        states.append(tracked.position(consumed=batches.fetched - 1).pending_rng[-1])
    return states


def test_fetches_that_draw_only_from_torch_keep_torch_s_state_after_the_first_ones() -> None:
    torch.manual_seed(0)
    states = _prefetched_states(DataLoader(Noisy(n=8 * 70), batch_size=8), 70)
    full = [n for n, state in enumerate(states, start=1) if _full(state)]
    assert full == [*range(1, LEARN + 1), CHECK_EVERY]
    assert all("torch" in state for state in states)


@pytest.mark.parametrize("noise", ["numpy", "python"])
def test_fetches_that_draw_from_numpy_or_python_keep_the_full_state(noise: Any) -> None:
    torch.manual_seed(0)
    states = _prefetched_states(DataLoader(Noisy(n=8 * 20, noise=noise), batch_size=8), 20)
    assert all(_full(state) for state in states)


class _LateDraws(Dataset[torch.Tensor]):
    """Draws from Python's generator only from sample ``start`` on."""

    def __init__(self, start: int) -> None:
        self.start = start

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(float(i) + (random.random() if i >= self.start else 0.0))


def test_a_draw_seen_only_later_turns_the_full_state_on_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loader = DataLoader(_LateDraws(start=4 * 20), batch_size=4)
    draws = FetchDraws()
    batches = iter(loader)
    kept = []
    with caplog.at_level(logging.WARNING, logger="onthefly.sessions.fetch_draws"):
        for _ in range(CHECK_EVERY + 3):
            kept.append(draws.before(loader))
            next(batches)
            draws.after()
    assert not any(_full(state) for state in kept[LEARN : CHECK_EVERY - 1])
    assert all(_full(state) for state in kept[CHECK_EVERY - 1 :])
    assert draws.full
    assert f"fetch {CHECK_EVERY} of the training data drew" in caplog.text


@pytest.mark.parametrize("noise", ["torch", "numpy"])
def test_a_fetch_kept_with_either_state_replays_with_the_same_draws(noise: Any) -> None:
    torch.manual_seed(0)
    tracked = TrackedLoader(DataLoader(Noisy(n=8 * 20, noise=noise), batch_size=8, shuffle=True))
    batches = iter(tracked)
    for _ in range(LEARN + 3):
        batches.trained = batches.fetched - 1
        ahead = next(batches)
    consumed = batches.fetched - 1
    position = tracked.position(consumed=consumed)
    assert _full(position.pending_rng[-1]) == (noise == "numpy")
    tracked.arm(Resume(position, rng.capture()))
    assert torch.equal(next(iter(tracked))[0], ahead[0])


@pytest.mark.parametrize("noise", ["numpy", "python"])
def test_lightning_resumes_exactly_when_loading_draws_from_numpy_or_python(
    noise: Any, tmp_path: Path
) -> None:
    steps, export_at = 15, 11  # past the first fetches, in the middle of epoch 1
    path = tmp_path / "mid.otf"
    full = lightning_run(steps, noise=noise).losses
    first = lightning_run(export_at, losses=Losses(export_at=export_at, path=path), noise=noise)
    rest = lightning_run(steps, resume_from=path, noise=noise).losses
    assert first.losses + rest == full
