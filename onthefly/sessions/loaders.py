"""Putting :class:`TrackedLoader` around the training loaders of either driver.

Native: ``trainer.train_loader`` is replaced by its wrapper before the first epoch.

Lightning: the fit loop builds its ``CombinedLoader`` and creates the first epoch's
iterator before ``on_train_start``; there the flattened loaders are wrapped (later epochs
are then tracked from their start) and the live iterators of the first epoch are wrapped
in place. Their start state is the one taken when the fit loop requested the loaders
(:func:`on_request` and :class:`Requested`): the global generators and the loaders' own,
right after ``train_dataloader()`` returned (nothing between that and the iterator's
creation draws random numbers in Lightning 2.6's own code). A resume rebuilds the
fetcher's iterator from the armed wrappers.

Lightning's private attributes used here (``fit_loop._combined_loader``, its
``_iterator``, ``fit_loop._data_source``, ``fit_loop._data_fetcher``) were checked against
Lightning 2.6.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader

from onthefly.callbacks._driver import is_lightning
from onthefly.sessions import loader_rng, rng
from onthefly.sessions.data_position import (
    DataPosition,
    Resume,
    TrackedIterator,
    TrackedLoader,
    in_main_process,
)
from onthefly.sessions.rng import RngState


@dataclass
class Requested:
    """Lightning: the random state when the fit loop last requested its training loaders.

    Attributes:
        global_rng: the global generators' state right after the request.
        generators: each requested loader's own generators with their state then.
    """

    global_rng: RngState
    generators: list[tuple[torch.Generator, torch.Tensor]] = field(default_factory=list)

    @classmethod
    def take(cls, requested: Any) -> Requested:
        """The state now, for the loaders Lightning was just handed (any nesting)."""
        found: list[tuple[torch.Generator, torch.Tensor]] = []
        for loader in _flattened(requested):
            for generator in loader_rng.generators(loader):
                if not any(generator is g for g, _ in found):
                    found.append((generator, generator.get_state()))
        return cls(rng.capture(), found)

    def start_state(self, loader: Any) -> RngState:
        """``loader``'s start state: the request's, with its generators as they were then
        (Lightning may have rebuilt the loader around the same generator objects)."""
        state = dict(self.global_rng)
        own = loader_rng.own_state(loader)
        if own is not None:
            then = [
                next((s for g, s in self.generators if g is gen), None)
                for gen in loader_rng.generators(loader)
            ]
            own["generators"] = [
                now if past is None else past
                for now, past in zip(own["generators"], then, strict=True)
            ]
            state[loader_rng.OWN] = own
        return state


def _flattened(loaders: Any) -> list[Any]:
    if isinstance(loaders, Mapping):
        return [item for value in loaders.values() for item in _flattened(value)]
    if isinstance(loaders, (list, tuple)):
        return [item for value in loaders for item in _flattened(value)]
    flattened = getattr(loaders, "flattened", None)  # a CombinedLoader
    return list(flattened) if isinstance(flattened, list) else [loaders]


def on_request(trainer: Any, listener: Callable[[Any], None]) -> Callable[[], None] | None:
    """Lightning: call ``listener(loaders)`` each time the fit loop requests its training
    loaders, right after the module's (or datamodule's) ``train_dataloader()`` returned.

    Returns:
        A function that stops listening, or ``None`` when the trainer's data source cannot
        be reached.
    """
    source = getattr(getattr(trainer, "fit_loop", None), "_data_source", None)
    if source is None or not callable(getattr(source, "dataloader", None)):
        return None
    request = source.dataloader
    own = vars(source)
    had, previous = "dataloader" in own, own.get("dataloader")
    listening = [True]

    def dataloader() -> Any:
        loaders = request()
        if listening[0]:
            listener(loaders)
        return loaders

    source.dataloader = dataloader

    def stop() -> None:
        listening[0] = False
        if own.get("dataloader") is dataloader:  # else a later listener wraps this one
            if had:
                own["dataloader"] = previous
            else:
                del own["dataloader"]

    return stop


def track(
    trainer: Any, requested: Requested | None, watch: Callable[[], bool] | None = None
) -> None:
    """Wrap the training loaders (idempotent; call at ``on_train_start`` and each epoch start).

    Args:
        trainer: either driver's trainer.
        requested: Lightning: the state of the loaders' last request, the start state of
            the iterators Lightning created itself (``None``: unknown).
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
            else TrackedIterator(
                it,
                None if requested is None else requested.start_state(loader),
                in_main_process(loader),
                loader=loader,
            )
            for it, loader in zip(live, raw, strict=True)
        ]


def mark_trained(trainer: Any, count: int) -> None:
    """Native: ``count`` batches of the epoch are trained on (fetches up to there need no
    RNG state). Lightning prefetches, so its iterators keep every fetch's state."""
    loader = trainer.train_loader
    iterator = loader.iterator if isinstance(loader, TrackedLoader) else None
    if iterator is not None:
        iterator.trained = count


def exact(trainer: Any, consumed: int) -> bool:
    """Whether an export after ``consumed`` trained batches of the epoch would resume
    exactly (native; Lightning's iterators keep every fetch's state)."""
    return all(loader.exact(consumed) for loader in _tracked(trainer))


def run_loaders(trainer: Any) -> list[Any]:
    """The user's loaders the run iterates (training, validation and test, those set up so
    far), unwrapped; nothing is requested from a module or datamodule."""
    if not is_lightning(trainer):
        found = [
            getattr(trainer, "train_loader", None),
            *getattr(trainer, "val_loaders", []),
            *getattr(trainer, "test_loaders", []),
        ]
    else:
        found = []
        for loop in (
            trainer.fit_loop,
            getattr(trainer.fit_loop.epoch_loop, "val_loop", None),
            getattr(trainer, "test_loop", None),
        ):
            combined = getattr(loop, "_combined_loader", None)
            found.extend([] if combined is None else combined.flattened)
        # A test loader given to fit's trainer as such (not one a datamodule would build).
        instance = getattr(getattr(trainer.test_loop, "_data_source", None), "instance", None)
        found.extend(x for x in _flattened(instance) if isinstance(x, DataLoader))
    unique: list[Any] = []
    for loader in (TrackedLoader.unwrap(item) for item in found if item is not None):
        if not any(loader is seen for seen in unique):
            unique.append(loader)
    return unique


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
