"""The runs the per-sample tests train: a zero model, data whose sample ``i`` has loss ``i**2``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

from onthefly.callbacks.onthefly import OnTheFly
from onthefly.callbacks.sample_tracker import SampleTracker

N = 60


def squares() -> TensorDataset:
    """With a zero model and MSE, the loss of sample i is i**2 (whatever else is in its batch)."""
    return TensorDataset(torch.zeros(N, 3), torch.arange(N, dtype=torch.float32).reshape(N, 1))


def zero_linear() -> nn.Linear:
    net = nn.Linear(3, 1)
    nn.init.zeros_(net.weight)
    nn.init.zeros_(net.bias)
    return net


def tracker_of(callbacks: list[Any]) -> SampleTracker:
    tracker = next(cb for cb in callbacks if isinstance(cb, OnTheFly)).sample_tracker
    assert tracker is not None
    return tracker


def assert_squares(tracker: SampleTracker, ids: list[int], seen: int) -> None:
    stats = tracker.store.training
    assert np.flatnonzero(stats.count).tolist() == ids
    assert stats.count[ids].tolist() == [seen] * len(ids)
    np.testing.assert_allclose(stats.loss_last[ids], np.array(ids) ** 2)
    np.testing.assert_allclose(stats.loss_mean[ids], np.array(ids) ** 2)
