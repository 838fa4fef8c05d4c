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

What each trainer holds (Lightning's ``CombinedLoader`` and its live iterator, the native
trainer's ``train_loader``) is reached through its driver
(:meth:`~onthefly.drivers.base.Driver.train_loaders`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.sessions import loader_rng, rng
from onthefly.sessions.data_position import (
    DataPosition,
    Resume,
    TrackedIterator,
    TrackedLoader,
    Watch,
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
    def take(cls, requested: list[Any]) -> Requested:
        """The state now, for the loaders Lightning was just handed."""
        found: list[tuple[torch.Generator, torch.Tensor]] = []
        for loader in requested:
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


def track(trainer: TrainerHost, requested: Requested | None, watch: Watch | None = None) -> None:
    """Wrap the training loaders (idempotent; call at ``on_train_start`` and each epoch start).

    Args:
        trainer: either driver's trainer.
        requested: Lightning: the state of the loaders' last request, the start state of
            the iterators Lightning created itself (``None``: unknown).
        watch: native: whether an export may come before a batch fetched now is trained
            (see :attr:`TrackedIterator.watch`).
    """
    run = driver(trainer)
    raw = run.train_loaders()
    # Either fit loop fetches an epoch's first batch right after creating its iterator
    # (Lightning 2.6's data fetcher prefetches it at once): that fetch needs no state.
    if not run.fetches_ahead:
        if raw and raw[0] is not None:
            run.replace_train_loaders([TrackedLoader.wrap(loader) for loader in raw])
            for loader in run.train_loaders():
                loader.watch, loader.adjacent = watch, True
        return
    if not raw or all(isinstance(loader, TrackedLoader) for loader in raw):
        return
    wrapped = [TrackedLoader.wrap(loader) for loader in raw]
    for loader in wrapped:
        loader.adjacent = True
    run.replace_train_loaders(wrapped)
    live = run.live_train_iterators()
    if isinstance(live, list) and len(live) == len(raw):
        live[:] = [
            it
            if isinstance(it, TrackedIterator)
            else TrackedIterator(
                it,
                None if requested is None else requested.start_state(loader),
                in_main_process(loader),
                loader=loader,
                draws=tracked.draws,
            )
            for it, loader, tracked in zip(live, raw, wrapped, strict=True)
        ]


def exact(trainer: TrainerHost, consumed: int) -> bool:
    """Whether an export after ``consumed`` trained batches of the epoch would resume
    exactly (native; Lightning's iterators keep every fetch's state)."""
    return all(loader.exact(consumed) for loader in tracked(trainer))


def run_loaders(trainer: TrainerHost) -> list[Any]:
    """The user's loaders the run iterates (training, validation and test, those set up so
    far), unwrapped; nothing is requested from a module or datamodule."""
    found = driver(trainer).run_loaders()
    unique: list[Any] = []
    for loader in (TrackedLoader.unwrap(item) for item in found if item is not None):
        if not any(loader is seen for seen in unique):
            unique.append(loader)
    return unique


def positions(trainer: TrainerHost, consumed: int) -> list[DataPosition]:
    """Where each training loader stands after ``consumed`` trained batches of the epoch."""
    return [
        it.position(consumed) if isinstance(it, TrackedIterator) else DataPosition(None, 0)
        for it in _iterators(trainer)
    ]


def resume(trainer: TrainerHost, saved: list[DataPosition], rng_after: RngState) -> None:
    """Arm the wrapped loaders with ``saved``; under Lightning, rebuild the epoch's iterator.

    Native: the loop's next ``iter()`` resumes. Lightning (at ``on_train_start``): the
    iterator built by ``setup_data`` is replaced at once.
    """
    run = driver(trainer)
    if not run.fetches_ahead:
        run.replace_train_loaders([TrackedLoader.wrap(x) for x in run.train_loaders()])
    for loader, position in zip(tracked(trainer), saved, strict=False):
        loader.arm(Resume(position, rng_after))
    run.restart_train_iterator()


def release(trainer: TrainerHost) -> None:
    """Stop the training loaders' worker processes (at the end of fit).

    The wrappers keep the last epoch's iterator for its position, so without this its
    workers would live on with the trainer until a garbage collection, which then stalls.
    """
    for loader in tracked(trainer):
        loader.release()


def tracked(trainer: TrainerHost) -> list[TrackedLoader]:
    """The training loaders wrapped so far."""
    return [x for x in driver(trainer).train_loaders() if isinstance(x, TrackedLoader)]


def _iterators(trainer: TrainerHost) -> list[Any]:
    run = driver(trainer)
    live = run.live_train_iterators()
    if live is not None:
        return list(live)
    # The trainer keeps no iterator of its own: the wrappers know theirs.
    return [x.iterator if isinstance(x, TrackedLoader) else None for x in run.train_loaders()]
