"""Putting :class:`TrackedLoader` around the training loaders of either driver.

Native: ``trainer.train_loader`` is replaced by its wrapper before the first epoch.

Lightning: the fit loop builds its ``CombinedLoader`` and creates the first epoch's
iterator before ``on_train_start``; there the flattened loaders are wrapped (later epochs
are then tracked from their start) and the live iterators of the first epoch are wrapped
in place, with the RNG state of ``on_fit_start`` as their start state (nothing between the
two draws random numbers in Lightning's own code). A resume rebuilds the fetcher's
iterator from the armed wrappers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onthefly.callbacks._driver import is_lightning
from onthefly.sessions.data_position import (
    DataPosition,
    Resume,
    TrackedIterator,
    TrackedLoader,
    in_main_process,
)
from onthefly.sessions.rng import RngState


def track(
    trainer: Any, fit_start_rng: RngState | None, watch: Callable[[], bool] | None = None
) -> None:
    """Wrap the training loaders (idempotent; call at ``on_train_start`` and each epoch start).

    Args:
        trainer: either driver's trainer.
        fit_start_rng: the RNG state at ``on_fit_start`` (Lightning's first epoch).
        watch: native: whether an export may come before a batch fetched now is trained
            (see :attr:`TrackedIterator.watch`).
    """
    if not is_lightning(trainer):
        if trainer.train_loader is not None:
            trainer.train_loader = TrackedLoader.wrap(trainer.train_loader)
            trainer.train_loader.watch = watch
        return
    combined = trainer.fit_loop._combined_loader
    if combined is None:
        return
    raw = list(combined.flattened)
    if all(isinstance(loader, TrackedLoader) for loader in raw):
        return
    combined.flattened = [TrackedLoader.wrap(loader) for loader in raw]
    live = getattr(getattr(combined, "_iterator", None), "iterators", None)
    if isinstance(live, list) and len(live) == len(raw):
        live[:] = [
            it
            if isinstance(it, TrackedIterator)
            else TrackedIterator(it, fit_start_rng, in_main_process(loader))
            for it, loader in zip(live, raw, strict=True)
        ]


def mark_trained(trainer: Any, count: int) -> None:
    """Native: ``count`` batches of the epoch are trained on (fetches up to there need no
    RNG state). Lightning prefetches, so its iterators keep every fetch's state."""
    loader = trainer.train_loader
    iterator = loader.iterator if isinstance(loader, TrackedLoader) else None
    if iterator is not None:
        iterator.trained = count


def positions(trainer: Any, consumed: int) -> list[DataPosition]:
    """Where each training loader stands after ``consumed`` trained batches of the epoch."""
    return [
        it.position(consumed) if isinstance(it, TrackedIterator) else DataPosition(None, 0)
        for it in _iterators(trainer)
    ]


def resume(trainer: Any, saved: list[DataPosition], rng_after: RngState) -> None:
    """Arm the wrapped loaders with ``saved``; under Lightning, rebuild the epoch's iterator.

    Native: the loop's next ``iter()`` resumes. Lightning (at ``on_train_start``): the
    iterator built by ``setup_data`` is replaced at once.
    """
    loaders = _loaders(trainer)
    for loader, position in zip(loaders, saved, strict=False):
        loader.arm(Resume(position, rng_after))
    if is_lightning(trainer):
        iter(trainer.fit_loop._data_fetcher)


def release(trainer: Any) -> None:
    """Stop the training loaders' worker processes (at the end of fit).

    The wrappers keep the last epoch's iterator for its position, so without this its
    workers would live on with the trainer until a garbage collection, which then stalls.
    """
    for loader in _tracked(trainer):
        loader.release()


def _loaders(trainer: Any) -> list[TrackedLoader]:
    if not is_lightning(trainer):
        trainer.train_loader = TrackedLoader.wrap(trainer.train_loader)
    return _tracked(trainer)


def _tracked(trainer: Any) -> list[TrackedLoader]:
    """The training loaders wrapped so far."""
    if is_lightning(trainer):
        combined = trainer.fit_loop._combined_loader
        candidates = [] if combined is None else combined.flattened
    else:
        candidates = [trainer.train_loader]
    return [loader for loader in candidates if isinstance(loader, TrackedLoader)]


def _iterators(trainer: Any) -> list[Any]:
    if not is_lightning(trainer):
        loader = trainer.train_loader
        return [loader.iterator if isinstance(loader, TrackedLoader) else None]
    combined = trainer.fit_loop._combined_loader
    live = getattr(getattr(combined, "_iterator", None), "iterators", None)
    return list(live) if isinstance(live, list) else []
