"""Each rank's share of the training data: the ``DistributedSampler``, kept, added, advanced.

As Lightning does (``use_distributed_sampler=True``), the native trainer gives a plain
``DataLoader`` whose sampler is the default sequential or random one a
``DistributedSampler`` (``shuffle`` as before, ``seed=0``, ``drop_last=False``), keeping
every other setting of the loader. A loader that already has a ``DistributedSampler`` is
kept; a loader with a custom sampler or batch sampler, over an ``IterableDataset``, of a
``DataLoader`` subclass, or any other iterable is used as given (with a warning: each rank
then iterates all of it). ``set_epoch(epoch)`` is called at the start of every epoch on
whatever sampler offers it, so a shuffling sampler draws a new order per epoch.
"""

from __future__ import annotations

import logging
from typing import Any

from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
)

from onthefly.dataloaders import loader_like

log = logging.getLogger(__name__)

SEED = 0
"""The shuffling seed of an added ``DistributedSampler`` (Lightning's default too)."""


def shard_loader(loader: Any, rank: int, world_size: int) -> Any:
    """``loader`` with this rank's share of the data (see the module docstring).

    Args:
        loader: the user's training loader.
        rank: this rank.
        world_size: the number of ranks.

    Returns:
        A new ``DataLoader`` over a ``DistributedSampler``, or ``loader`` itself.
    """
    reason = _why_not_sharded(loader)
    if reason is None:
        return _rebuilt(loader, rank, world_size)
    if reason:
        log.warning(
            "the training loader is used as given on every rank (%s): each rank iterates all "
            "of it; give it a DistributedSampler so the ranks train on different samples",
            reason,
        )
    return loader


def _why_not_sharded(loader: Any) -> str | None:
    """Why ``loader`` is kept as it is (``""``: it is already sharded); ``None``: shard it."""
    if not isinstance(loader, DataLoader):
        return f"a {type(loader).__name__}, not a DataLoader"
    if isinstance(loader.sampler, DistributedSampler):
        return ""
    if type(loader) is not DataLoader:
        return f"a DataLoader subclass {type(loader).__name__}"
    if isinstance(loader.dataset, IterableDataset):
        return "an IterableDataset has no sampler"
    batch_sampler = loader.batch_sampler
    if batch_sampler is not None and type(batch_sampler) is not BatchSampler:
        return f"a custom batch sampler {type(batch_sampler).__name__}"
    sampler = loader.sampler
    if type(sampler) is RandomSampler:
        if sampler.replacement or sampler._num_samples is not None:
            return "a RandomSampler with replacement or num_samples"
        return None
    if type(sampler) is SequentialSampler:
        return None
    return f"a custom sampler {type(sampler).__name__}"


def _rebuilt(loader: DataLoader[Any], rank: int, world_size: int) -> DataLoader[Any]:
    sampler: DistributedSampler[Any] = DistributedSampler(
        loader.dataset,
        num_replicas=world_size,
        rank=rank,
        shuffle=isinstance(loader.sampler, RandomSampler),
        seed=SEED,
        drop_last=False,
    )
    # The new loader replaces the user's: it keeps their generator, persistent workers and
    # in_order too.
    return loader_like(
        loader,
        sampler=sampler,
        generator=loader.generator,
        persistent_workers=loader.persistent_workers,
        in_order=loader.in_order,
    )


def _samplers(loader: Any) -> list[Any]:
    """The loader's sampler and its batch sampler's sampler (once each), as Lightning finds
    them for ``set_epoch``."""
    found: dict[int, Any] = {}
    sampler = getattr(loader, "sampler", None)
    if sampler is not None:
        found[id(sampler)] = sampler
    inner = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    if inner is not None:
        found[id(inner)] = inner
    return list(found.values())


def set_sampler_epoch(loader: Any, epoch: int) -> None:
    """Call ``set_epoch(epoch)`` on the loader's samplers that have it."""
    for sampler in _samplers(loader):
        set_epoch = getattr(sampler, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)


def sampler_epoch(loader: Any) -> int | None:
    """The epoch the loader's sampler was last set to (``None``: no epoch-aware sampler)."""
    for sampler in _samplers(loader):
        epoch = getattr(sampler, "epoch", None)
        if isinstance(epoch, int):
            return epoch
    return None
