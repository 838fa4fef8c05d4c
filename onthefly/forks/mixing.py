"""Loaders that mix a slice with the rest of the training set: replay and oversampling.

* **Replay** (:func:`replay_loader`): a fork trained on a narrow slice alone forgets
  everything else (a specialist of two classes answers those two classes everywhere);
  replay mixes whole batches of the rest of the training set in, a share ``replay`` of the
  batches, spread evenly (Bresenham's rule: batch ``i`` is a rest batch when
  ``floor((i + 1) r) > floor(i r)``). An epoch is one pass over the slice plus the rest
  batches that go with it, so a budget of ``epochs`` stays a number of passes over the slice
  and a budget of ``steps`` counts every batch.
* **Oversampling** (:func:`oversample_loader`): the whole training set drawn with
  replacement, the slice's samples weighted so that they make up ``share`` of the draws:
  the baseline a fork must beat (training the parent on, the slice made more frequent).

Both draw their random order from a copy of the parent loader's generator when it has one,
else from the global generator (which a fork draws from inside its own forked RNG); the
parent loader is never iterated.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler, WeightedRandomSampler

from onthefly.dataloaders import loader_like
from onthefly.errors import ConfigurationError
from onthefly.forks.slice_loader import batch_size_of, generator_copy

OVERSAMPLE_SHARE = 0.5
"""The share of the draws that the slice makes up in the oversampling baseline."""


class ReplaySampler(Sampler[int]):
    """Dataset indices in batches of ``batch_size``: slice batches, with rest batches mixed in.

    Every batch is full: the slice and the rest are each walked in a random order, started
    again (in a new order) when they run out, so the last slice batch of an epoch may repeat
    a few of its samples.

    Args:
        slice_ids: the slice's dataset indices.
        rest_ids: the other training indices the replayed batches come from.
        batch_size: samples per batch.
        replay: the share of the batches that come from the rest, in ``[0, 1)``.
        generator: draws the orders (``None``: the global generator).

    Example:
        >>> sampler = ReplaySampler(range(8), range(8, 100), batch_size=4, replay=0.5)
        >>> len(sampler)  # two slice batches and two rest batches per epoch
        16
    """

    def __init__(
        self,
        slice_ids: Sequence[int],
        rest_ids: Sequence[int],
        batch_size: int,
        replay: float,
        generator: torch.Generator | None = None,
    ) -> None:
        if not 0 <= replay < 1:
            raise ConfigurationError(f"replay={replay}; expected a share of batches in [0, 1)")
        if replay > 0 and not len(rest_ids):
            raise ConfigurationError(
                "replay needs training samples outside the slice; the slice is the whole "
                "training set"
            )
        self.slice_ids = torch.as_tensor(list(slice_ids), dtype=torch.int64)
        self.rest_ids = torch.as_tensor(list(rest_ids), dtype=torch.int64)
        self.batch_size = batch_size
        self.replay = replay
        self.generator = generator
        slice_batches = math.ceil(len(self.slice_ids) / batch_size)
        self.batches = math.ceil(slice_batches / (1 - replay))
        self.rest_batches = self.batches - slice_batches

    def __len__(self) -> int:
        return self.batches * self.batch_size

    def __iter__(self) -> Iterator[int]:
        slice_draws = _Draws(self.slice_ids, self.generator)
        rest_draws = _Draws(self.rest_ids, self.generator)
        total, rest = self.batches, self.rest_batches
        for i in range(total):
            rest_batch = (i + 1) * rest // total > i * rest // total
            yield from (rest_draws if rest_batch else slice_draws).take(self.batch_size)


class _Draws:
    """Indices in a random order, started again in a new order when they run out."""

    def __init__(self, ids: torch.Tensor, generator: torch.Generator | None) -> None:
        self.ids, self.generator = ids, generator
        self.order: list[int] = []

    def take(self, count: int) -> list[int]:
        taken: list[int] = []
        while len(taken) < count:
            if not self.order:
                permutation = torch.randperm(len(self.ids), generator=self.generator)
                self.order = self.ids[permutation].tolist()
            need = count - len(taken)
            taken += self.order[:need]
            self.order = self.order[need:]
        return taken


def replay_loader(
    loader: DataLoader,
    slice_ids: Sequence[int],
    replay: float,
    *,
    batch_size: int | None = None,
    persistent_workers: bool = False,
) -> DataLoader:
    """A loader of the slice with a share ``replay`` of batches from the rest of the
    training set (every index of ``loader.dataset`` outside the slice).

    Raises:
        ConfigurationError: ``replay`` outside ``[0, 1)``, or no sample outside the slice.
    """
    everything = np.arange(len(loader.dataset))  # type: ignore[arg-type]
    rest = np.setdiff1d(everything, np.asarray(list(slice_ids), dtype=np.int64)).tolist()
    size = batch_size_of(loader, batch_size)
    sampler = ReplaySampler(slice_ids, rest, size, replay, generator_copy(loader.generator))
    return _sampled(loader, sampler, size, persistent_workers)


def oversample_loader(
    loader: DataLoader,
    slice_ids: Sequence[int],
    share: float = OVERSAMPLE_SHARE,
    *,
    persistent_workers: bool = False,
) -> DataLoader:
    """A loader over the whole training set, drawn with replacement, in which the slice's
    samples make up ``share`` of the draws (one pass: as many draws as samples).

    Raises:
        ConfigurationError: ``share`` outside ``(0, 1)``, or a slice that is the whole set.
    """
    n = len(loader.dataset)  # type: ignore[arg-type]
    inside = torch.zeros(n, dtype=torch.bool)
    inside[torch.as_tensor(list(slice_ids), dtype=torch.int64)] = True
    count = int(inside.sum())
    if not 0 < share < 1 or count in (0, n):
        raise ConfigurationError(
            f"oversampling a slice of {count} of {n} samples to a share of {share}; expected "
            "a share in (0, 1) and a slice that is neither empty nor the whole training set"
        )
    weights = torch.where(inside, share / count, (1 - share) / (n - count)).double()
    generator = generator_copy(loader.generator)
    sampler = WeightedRandomSampler(
        weights,  # type: ignore[arg-type]  # a tensor is what torch itself turns them into
        n,
        replacement=True,
        generator=generator,
    )
    return _sampled(loader, sampler, batch_size_of(loader), persistent_workers)


def _sampled(
    loader: DataLoader, sampler: Sampler[int], batch_size: int, persistent_workers: bool
) -> DataLoader:
    return loader_like(
        loader,
        batch_size=batch_size,
        sampler=sampler,
        drop_last=False,
        generator=generator_copy(loader.generator),
        persistent_workers=persistent_workers and loader.num_workers > 0,
    )
