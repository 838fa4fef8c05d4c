"""The data of a fork: a new loader over a slice of the run's training data.

:func:`subset_loader` makes a new ``DataLoader`` over ``Subset(dataset, indices)`` with the
parent loader's settings (:func:`~onthefly.dataloaders.loader_like`: batch size, collate
function, workers and their options, pin memory, ``drop_last``; no persistent workers, so
they end with the fork); shuffled when the parent's sampler shuffles (a ``RandomSampler``,
or a shuffling ``DistributedSampler``: a fork reads its slice of the whole dataset, never a
rank's share), with a copy of the parent loader's generator when it has one (else the global
generator, which the fork draws from inside its own forked RNG). The parent loader is never
iterated.

A training slice never trains a batch of one sample while it has more: when the parent keeps
its last partial batch, a last batch of a single sample joins the batch before it
(:class:`FoldedBatchSampler`). Such a batch fails in train mode under batch normalisation
("Expected more than 1 value per channel") and is a one-sample gradient step anyway; every
sample is still trained once per epoch. Evaluation loaders (an explicit ``drop_last``) keep
their batches as the batch size cuts them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    Subset,
)

from onthefly.dataloaders import loader_like
from onthefly.errors import ConfigurationError
from onthefly.sessions.data_position import TrackedLoader


def check_indices(indices: Sequence[int], size: int) -> list[int]:
    """``indices`` as ints, each a valid index into a dataset of ``size`` samples.

    Raises:
        ConfigurationError: an empty list, or indices outside ``[0, size)`` (the first few).
    """
    values = [int(i) for i in indices]
    if not values:
        raise ConfigurationError("the slice is empty; expected at least one sample")
    bad = [i for i in values if not 0 <= i < size][:5]
    if bad:
        raise ConfigurationError(
            f"indices {bad} are out of range; expected dataset indices in [0, {size})"
        )
    return values


def training_data(loader: Any) -> DataLoader:
    """The run's training ``DataLoader`` over a map-style dataset.

    Raises:
        ConfigurationError: no loader, not a ``DataLoader``, or an iterable dataset (a slice
            needs indices).
    """
    loader = TrackedLoader.unwrap(loader)
    if loader is None:
        raise ConfigurationError("this run has no training loader to take a slice of")
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        raise ConfigurationError(
            "forks need the training data as a torch DataLoader over a map-style dataset "
            f"(indexable, with a length); got {type(loader).__name__}"
        )
    return loader


def subset_loader(
    loader: DataLoader,
    indices: Sequence[int],
    *,
    batch_size: int | None = None,
    shuffle: bool | None = None,
    drop_last: bool | None = None,
    persistent_workers: bool = False,
) -> DataLoader:
    """A new loader over ``Subset(loader.dataset, indices)`` with ``loader``'s settings.

    Args:
        loader: the parent's loader (never iterated).
        indices: dataset indices of the samples.
        batch_size: instead of the parent's.
        shuffle: instead of the parent's (shuffled when its sampler is a ``RandomSampler``).
        drop_last: instead of the parent's; given, the batches are cut exactly as the batch
            size says (evaluation). Left out (training) with a parent that keeps its last
            partial batch, a last batch of a single sample joins the batch before it.
        persistent_workers: keep the worker processes from one epoch to the next (when the
            parent's loader has workers).

    Raises:
        ConfigurationError: ``drop_last`` with fewer samples than one batch.
    """
    size = batch_size_of(loader, batch_size)
    drop = loader.drop_last if drop_last is None else drop_last
    if drop and len(indices) < size:
        raise ConfigurationError(
            f"the slice has {len(indices)} samples, fewer than one batch of {size} with "
            "drop_last=True; expected a smaller batch_size or a larger slice"
        )
    sliced = loader_like(
        loader,
        dataset=Subset(loader.dataset, list(indices)),
        batch_size=size,
        shuffle=_shuffles(order_of(loader)) if shuffle is None else shuffle,
        drop_last=drop,
        generator=generator_copy(loader.generator),
        persistent_workers=persistent_workers and loader.num_workers > 0,
    )
    if drop_last is not None or drop:
        return sliced
    # Training: the same order (its sampler, its generator), a lone last sample folded in.
    return loader_like(
        sliced,
        batch_sampler=FoldedBatchSampler(sliced.sampler, size),
        generator=sliced.generator,
        persistent_workers=sliced.persistent_workers,
    )


class FoldedBatchSampler(BatchSampler):
    """Batches of ``batch_size`` indices drawn from ``sampler``, in which a last batch of a
    single sample is folded into the batch before it (that one then holds
    ``batch_size + 1``). Every index is kept; a sampler of one index gives one batch of one.

    Args:
        sampler: the order of the indices (a ``RandomSampler`` draws a new one each pass).
        batch_size: indices per batch.

    Example:
        >>> batches = FoldedBatchSampler(range(9), batch_size=4)
        >>> list(batches), len(batches)
        ([[0, 1, 2, 3], [4, 5, 6, 7, 8]], 2)
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int) -> None:
        super().__init__(sampler, batch_size, drop_last=False)

    def __iter__(self) -> Iterator[list[int]]:
        held: list[int] | None = None
        for batch in super().__iter__():
            if held is not None and len(batch) == 1 < self.batch_size:  # the last batch
                yield held + batch
                return
            if held is not None:
                yield held
            held = batch
        if held is not None:
            yield held

    def __len__(self) -> int:
        full, rest = divmod(len(self.sampler), self.batch_size)  # type: ignore[arg-type]
        if rest == 1 and full > 0:
            return full
        return full + int(rest > 0)


def batch_size_of(loader: DataLoader, batch_size: int | None = None) -> int:
    """``batch_size`` when given, else ``loader``'s (also from a batch sampler; 1 if none)."""
    return int(
        batch_size or loader.batch_size or getattr(loader.batch_sampler, "batch_size", None) or 1
    )


def order_of(loader: DataLoader) -> Any:
    """The sampler that orders ``loader``'s samples: its batch sampler's when it has one (a
    loader built with a ``batch_sampler`` keeps a plain ``SequentialSampler`` it never uses)."""
    return getattr(loader.batch_sampler, "sampler", loader.sampler)


def _shuffles(sampler: Any) -> bool:
    if isinstance(sampler, DistributedSampler):
        return bool(sampler.shuffle)
    return isinstance(sampler, RandomSampler)


def generator_copy(generator: torch.Generator | None) -> torch.Generator | None:
    """A copy of ``generator`` (``None`` stays ``None``), so that a fork's shuffles never
    advance the parent loader's generator."""
    if generator is None:
        return None
    twin = torch.Generator(device=generator.device)
    twin.set_state(generator.get_state())
    return twin
