"""``DataLoader`` helpers: new loaders that load the way the user's loader does
(:func:`loader_like`), stopping an iterator's worker processes (:func:`release_workers`), and
telling a sampler's recorder of drawn index lists about skipped batches
(:func:`forget_drawn`)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch
from torch.utils.data import DataLoader, Dataset, Sampler
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter


def loader_like(
    loader: DataLoader[Any],
    *,
    dataset: Dataset[Any] | None = None,
    batch_size: int | None = None,
    drop_last: bool | None = None,
    sampler: Sampler[Any] | None = None,
    batch_sampler: Sampler[list[int]] | None = None,
    shuffle: bool = False,
    generator: torch.Generator | None = None,
    persistent_workers: bool = False,
    in_order: bool = True,
) -> DataLoader[Any]:
    """A new plain ``DataLoader`` that loads like ``loader``, with the given changes.

    Carried over, as the user set them: the dataset, batch size and ``drop_last`` (unless
    given), the collate function, the number of workers and memory pinning (with its device).
    The options only workers use (timeout, worker init function, multiprocessing context,
    prefetch factor) are carried over only when there are workers: torch refuses several of
    them without workers, and a loader whose ``num_workers`` was lowered after it was built
    still holds them.

    Chosen by the caller instead, because carrying them over would be wrong for most new
    loaders: the order (a sampler belongs to its dataset, so ``sampler`` or ``shuffle``;
    sequential by default), the ``generator`` (the new loader would move the parent's one:
    pass a copy, or the parent's own when the new loader replaces it), persistent workers
    (off, so that the new loader's workers end with each pass) and ``in_order``. The parent
    loader is never iterated. A batch sampler is never carried over; one given replaces the
    batch size, ``drop_last`` and the order (it draws the batches itself).

    Args:
        loader: the loader to imitate.
        dataset: instead of ``loader.dataset``.
        batch_size: instead of ``loader.batch_size``.
        drop_last: instead of ``loader.drop_last``.
        sampler: the order of the samples (``shuffle`` must then be ``False``).
        batch_sampler: the batches, as lists of indices (``sampler`` and ``shuffle`` must
            then be left out).
        shuffle: a fresh random order every pass.
        generator: draws the random order and the workers' seeds.
        persistent_workers: keep the workers between passes (with workers only).
        in_order: ``False`` lets batches arrive as soon as a worker has them.

    Raises:
        ValueError: from ``DataLoader``, e.g. both ``sampler`` and ``shuffle``.

    Example:
        >>> parent = DataLoader(range(10), batch_size=4, num_workers=2, timeout=30)
        >>> loader = loader_like(parent, shuffle=True, drop_last=True)
        >>> loader.batch_size, loader.num_workers, loader.timeout, loader.drop_last
        (4, 2, 30, True)
    """
    workers = loader.num_workers
    options: dict[str, Any] = {}
    if workers > 0:
        options = {
            "timeout": loader.timeout,
            "worker_init_fn": loader.worker_init_fn,
            "multiprocessing_context": loader.multiprocessing_context,
            "prefetch_factor": loader.prefetch_factor,
            "persistent_workers": persistent_workers,
        }
    if not in_order:  # passed only when asked: the keyword is newer than our oldest torch
        options["in_order"] = False
    if batch_sampler is not None:  # torch refuses a batch size or drop_last beside one
        options["batch_sampler"] = batch_sampler
    else:
        options["batch_size"] = loader.batch_size if batch_size is None else batch_size
        options["drop_last"] = loader.drop_last if drop_last is None else drop_last
    return DataLoader(
        loader.dataset if dataset is None else dataset,
        shuffle=shuffle,
        sampler=sampler,
        num_workers=workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        pin_memory_device=loader.pin_memory_device,
        generator=generator,
        **options,
    )


def release_workers(iterator: Any, loader: Any = None) -> None:
    """Stop the worker processes behind a ``DataLoader`` iterator now, as Lightning does at
    the end of fit; anything else is left alone.

    An iterator kept past its epoch (stopped mid-epoch, or never asked for the batch after
    the last) keeps its workers alive. Once it sits in a reference cycle only the garbage
    collector frees it, and that collection then waits for each worker to time out (about
    5 s each, measured with torch 2.13), on whichever thread it happens to run.

    Args:
        iterator: an iterator of a ``DataLoader`` (any other object is ignored).
        loader: its ``DataLoader``; its cached persistent-workers iterator is stopped and
            dropped too, so that its next pass starts new workers.
    """
    for candidate in (iterator, getattr(loader, "_iterator", None)):
        if isinstance(candidate, _MultiProcessingDataLoaderIter):
            candidate._shutdown_workers()
    if isinstance(loader, DataLoader):
        loader._iterator = None


RECORDER = "_onthefly_recorder"
"""The attribute of a sampler's type that holds what records the index lists it draws (the
per-sample attribution, :class:`onthefly.samples.attribution.SamplerTaps`)."""


@runtime_checkable
class DrawRecorder(Protocol):
    """Records the index lists a sampler draws, until the batches made of them are trained."""

    def drop(self, count: int) -> None:
        """Forget the ``count`` oldest index lists (batches skipped, never delivered)."""
        ...


def forget_drawn(loader: Any, count: int) -> None:
    """Forget the ``count`` oldest index lists recorded from ``loader``'s sampler.

    A resumed epoch skips the batches already trained on by drawing them from the loader;
    their index lists were recorded but will never be trained on, so the recording must drop
    them to stay in step with the batches. A no-op for a loader that is not recorded.
    """
    sampler = getattr(loader, "batch_sampler", None)
    if sampler is None:
        sampler = getattr(loader, "sampler", None)
    recorder = getattr(type(sampler), RECORDER, None)
    if isinstance(recorder, DrawRecorder):
        recorder.drop(count)
