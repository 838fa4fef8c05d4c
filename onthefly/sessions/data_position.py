"""Where the training data stands, and how to get back there in a new process.

A ``DataLoader`` with ``shuffle=True`` draws its permutation seed (and its workers' base
seed) from torch's global generator when its iterator is created and first read — or from
the loader's or sampler's own generator when it has one (see :mod:`~.loader_rng`). So an
epoch's data order is fixed by those states right before the iterator was created.
:class:`TrackedLoader` wraps the training loader, remembers them for each epoch's
iterator and counts the batches fetched from it; with the number of batches already
trained on, that is the :class:`DataPosition`.

Resuming (:class:`Resume`) recreates the same iterator: restore the epoch's start state,
create the iterator, skip the batches already trained on (at the sampler, without loading
them, for a single-process map-style loader; otherwise by fetching and dropping them, which
also replays the workers' own random draws), re-fetch any batch that was fetched but not
yet trained on with the state it was fetched with, and finally restore the state of the
export point (the loader's own generators included). Worker processes are seeded from the
same base seed, so ``num_workers > 0`` resumes exactly too.

Capturing the RNG state costs ~20 µs (Python's state alone ~10 µs), so a fetch keeps it
only when it may be needed: when the fetch runs ahead of training (prefetching: an export
before the batch is trained replays it), or when the trainer says an export may come before
the fetched batch is trained (:attr:`TrackedIterator.trained` and
:attr:`TrackedLoader.watch`). An epoch's first fetch (the batch a pause during validation or
the epoch change holds at) needs no state of its own when it follows the creation of its
iterator (:attr:`TrackedIterator.adjacent`): replayed, it draws from the state the
re-created iterator leaves, so an empty state stands for it. A loop that fetches each batch
right before training it, and exports only between batches, thus captures once per epoch,
when the epoch's iterator is created.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from torch.utils.data import DataLoader, IterableDataset

from onthefly.dataloaders import forget_drawn, release_workers
from onthefly.sessions import loader_rng, rng
from onthefly.sessions.fetch_draws import FetchDraws
from onthefly.sessions.rng import RngState

log = logging.getLogger(__name__)

PREFETCH_DEPTH = 8
"""Fetched-but-untrained batches whose fetch-time RNG state is remembered."""


@dataclass
class DataPosition:
    """The position of one training loader inside an epoch.

    Attributes:
        start_rng: the RNG state right before the epoch's iterator was created: the global
            generators and the loader's own (``None``: unknown, e.g. a loader that was never
            iterated).
        consumed: batches of this epoch already trained on.
        pending_rng: for each batch fetched but not yet trained on (prefetching), the RNG
            state right before it was fetched.
        own_rng: the loader's own generators and samplers at the export point
            (:func:`~.loader_rng.own_state`; ``None``: it has none, or an older file).
    """

    start_rng: RngState | None
    consumed: int = 0
    pending_rng: list[RngState] = field(default_factory=list)
    own_rng: dict[str, Any] | None = None

    def to_state(self) -> dict[str, Any]:
        """Plain containers and tensors, for ``torch.save`` / ``weights_only`` loading."""
        return {
            "start_rng": self.start_rng,
            "consumed": self.consumed,
            "pending_rng": list(self.pending_rng),
            "own_rng": self.own_rng,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> DataPosition:
        """The inverse of :meth:`to_state`."""
        return cls(
            state["start_rng"],
            int(state["consumed"]),
            list(state["pending_rng"]),
            state.get("own_rng"),
        )


class Watch(Protocol):
    """Says whether an export may come soon: e.g. the session's inbox, set while commands
    wait (one of them may export before the batch fetched now is trained)."""

    waiting: bool


class TrackedIterator(Iterator[Any]):
    """An epoch's batch iterator that counts fetches and, in the main process, keeps the
    RNG state each recent fetch started from.

    Attributes:
        start_batch: the index of the first batch it yields (non-zero after a resume);
            the native loop numbers batches from it.
        trained: batches of the epoch trained on, as the trainer reports them (a plain int
            set after each batch); ``None`` (not reported) keeps every fetch's RNG state.
        watch: says whether an export may come before a batch fetched now is trained (its
            ``waiting``, read only for a fetch that does not run ahead of training).
        adjacent: its first fetch follows its creation, nothing drawing random numbers in
            between (an iterator the wrapper created for a loop that fetches at once).
    """

    def __init__(
        self,
        inner: Iterator[Any],
        start_rng: RngState | None,
        main_process: bool,
        start_batch: int = 0,
        replay: Iterable[tuple[RngState, Any]] = (),
        watch: Watch | None = None,
        loader: Any = None,
        draws: FetchDraws | None = None,
        adjacent: bool = False,
    ) -> None:
        self.inner = inner
        self.adjacent = adjacent
        self.start_rng = start_rng
        self.start_batch = start_batch
        self.trained: int | None = None
        self.watch = watch
        self.loader = loader
        self._main_process = main_process
        self._replay: deque[tuple[RngState, Any]] = deque(replay)
        self.fetched = start_batch
        self._history: deque[tuple[int, RngState]] = deque(maxlen=PREFETCH_DEPTH)
        self._draws = draws if draws is not None else FetchDraws()

    def __next__(self) -> Any:
        if self._replay:
            state, batch = self._replay.popleft()
            self._history.append((self.fetched, state))
        else:
            # Whether this fetch's RNG state may be needed (a few reads, no call: every fetch).
            trained, fetched, watch = self.trained, self.fetched, self.watch
            first = fetched == self.start_batch
            keep = self._main_process and (
                trained is None
                or fetched > trained
                or first
                or (watch is not None and watch.waiting)
            )
            if keep and first and self.adjacent:
                # Replayed, it draws from the state its re-created iterator leaves: nothing
                # to restore (see the module docstring).
                self._history.append((fetched, {}))
                self._draws.forget(self.loader)
                keep = False
            elif keep:
                self._history.append((fetched, self._draws.before(self.loader, first)))
            batch = next(self.inner)
            if keep:
                self._draws.after()
        self.fetched += 1
        return batch

    def _capture(self) -> RngState:
        return loader_rng.capture(self.loader, cuda=False)

    def exact(self, consumed: int) -> bool:
        """Whether an export once ``consumed`` batches were trained on resumes exactly: every
        batch fetched but not trained on was fetched outside this process or with its RNG
        state kept (:meth:`position` warns otherwise)."""
        if not self._main_process or self.fetched <= consumed:
            return True
        kept = {index for index, _ in self._history}
        return all(index in kept for index in range(consumed, self.fetched))

    def position(self, consumed: int) -> DataPosition:
        """The position once ``consumed`` batches of the epoch were trained on."""
        pending = [state for index, state in self._history if index >= consumed]
        own = loader_rng.own_state(self.loader)
        if self._main_process and not pending and self.fetched == consumed + 1:
            # A batch fetched without its state (no export was expected before its training):
            # nothing drew random numbers since its fetch unless the fetch itself did.
            log.warning(
                "exported between fetching batch %d and training it; its resumed data is "
                "exact only if loading it drew no random numbers",
                consumed,
            )
            pending = [self._capture()]
        if self._main_process and len(pending) < self.fetched - consumed:
            log.warning(
                "the loader ran %d batches ahead of training; the resumed data order is exact "
                "only up to %d batches of prefetching",
                self.fetched - consumed,
                PREFETCH_DEPTH,
            )
        return DataPosition(self.start_rng, consumed, pending if self._main_process else [], own)


class TrackedLoader:
    """Wraps a training loader; everything but iteration is forwarded to it.

    Args:
        loader: the user's loader (a ``DataLoader`` or any iterable of batches).

    Example:
        >>> tracked = TrackedLoader.wrap(train_loader)  # doctest: +SKIP
        >>> batches = iter(tracked); next(batches)  # doctest: +SKIP
        >>> tracked.position(consumed=1)  # doctest: +SKIP
    """

    def __init__(self, loader: Iterable[Any]) -> None:
        self.loader = loader
        self.iterator: TrackedIterator | None = None
        self.watch: Watch | None = None
        self.adjacent = False
        """The loop that iterates it fetches the first batch right after creating the
        iterator (see :attr:`TrackedIterator.adjacent`)."""
        self.draws = FetchDraws()
        self._resume: Resume | None = None

    @classmethod
    def wrap(cls, loader: Any) -> TrackedLoader:
        """``loader`` itself when already wrapped, else a new wrapper."""
        return loader if isinstance(loader, TrackedLoader) else cls(loader)

    @staticmethod
    def unwrap(loader: Any) -> Any:
        """The user's loader behind a wrapper; any other loader as it is."""
        return loader.loader if isinstance(loader, TrackedLoader) else loader

    def __iter__(self) -> TrackedIterator:
        resume, self._resume = self._resume, None
        if resume is not None:
            self.iterator = resume.open(self.loader, self.draws)
        else:
            start = loader_rng.capture(self.loader)
            self.iterator = TrackedIterator(
                iter(self.loader),
                start,
                in_main_process(self.loader),
                loader=self.loader,
                draws=self.draws,
                adjacent=self.adjacent,
            )
        self.iterator.watch = self.watch
        return self.iterator

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the wrapper lacks: sampler, dataset, batch_size, …
        if name in ("loader", "iterator", "watch", "adjacent", "draws", "_resume"):
            raise AttributeError(name)
        return getattr(self.loader, name)

    # Lightning treats loaders with these two methods as resumable and stops warning that a
    # mid-epoch restart is inexact; the position itself travels in the session file.
    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def release(self) -> None:
        """Stop the workers of the current epoch's iterator, persistent ones included (at
        the end of fit); its position stays readable for an export."""
        if self.iterator is not None:
            release_workers(self.iterator.inner, self.loader)

    def arm(self, resume: Resume) -> None:
        """Make the next ``iter()`` resume at ``resume``'s position."""
        self._resume = resume

    def position(self, consumed: int) -> DataPosition:
        """The current epoch's position after ``consumed`` trained batches."""
        if self.iterator is None:
            return DataPosition(None, 0)
        return self.iterator.position(consumed)

    def exact(self, consumed: int) -> bool:
        """Whether an export after ``consumed`` trained batches resumes exactly (see
        :meth:`TrackedIterator.exact`)."""
        return self.iterator is None or self.iterator.exact(consumed)


@dataclass
class Resume:
    """Recreates an epoch's iterator at a saved position.

    Args:
        position: where the loader stood.
        rng_after: the global RNG state at the export point, restored once positioned
            (with the loader's own generators of ``position.own_rng``).
    """

    position: DataPosition
    rng_after: RngState

    def open(self, loader: Iterable[Any], draws: FetchDraws | None = None) -> TrackedIterator:
        """The iterator of ``loader`` positioned as saved (the RNG is left at ``rng_after``);
        ``draws``: what the loader's fetches are known to draw (learned anew when ``None``)."""
        position = self.position
        if position.start_rng is not None:
            loader_rng.restore(loader, position.start_rng)
        inner = iter(loader)
        _skip(loader, inner, position.consumed)
        # The skipped batches' indices were drawn from the sampler: the per-sample
        # attribution must not hand them to the batches that are trained next.
        forget_drawn(loader, position.consumed)
        replay = []
        for state in position.pending_rng:
            loader_rng.restore(loader, state)
            try:
                replay.append((state, next(inner)))
            except StopIteration:
                break
        rng.restore(self.rng_after)
        loader_rng.restore_own(loader, position.own_rng)
        return TrackedIterator(
            inner,
            position.start_rng,
            in_main_process(loader),
            start_batch=position.consumed,
            replay=replay,
            loader=loader,
            draws=draws,
        )


def in_main_process(loader: Any) -> bool:
    """Whether fetching a batch runs in this process (and may draw from its RNG)."""
    return not (isinstance(loader, DataLoader) and loader.num_workers > 0)


def _skip(loader: Any, iterator: Iterator[Any], count: int) -> None:
    """Advance ``iterator`` by ``count`` batches, without loading them when possible."""
    next_index = getattr(iterator, "_next_index", None)
    map_style = isinstance(loader, DataLoader) and not isinstance(loader.dataset, IterableDataset)
    if map_style and in_main_process(loader) and callable(next_index):
        # A single-process map-style iterator draws its indices from the sampler: skipping
        # indices skips the batches without reading the dataset.
        try:
            for _ in range(count):
                next_index()
        except StopIteration:
            return
        iterator._num_yielded += count  # type: ignore[attr-defined]
        return
    for _ in range(count):
        try:
            next(iterator)
        except StopIteration:
            return
