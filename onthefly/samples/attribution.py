"""The dataset index of every sample of a training batch, without touching the user's loaders.

A ``DataLoader`` over a map-style dataset draws each batch's indices from its batch sampler
(or sampler) in its main process, in the order the batches come out — also with
``num_workers > 0``, prefetching and persistent workers (``in_order=True``, the default). So
recording the index lists the sampler yields, first in first out, and taking one per batch
gives each sample's exact dataset index, whatever the sampler: shuffling, a custom sampler, a
batch sampler, a ``DistributedSampler`` (its indices are dataset indices).

The recording: for the duration of ``fit``, the index sampler object's class is switched to a
subclass whose ``__iter__`` records what the original yields; :meth:`SamplerTaps.remove`
switches it back. The sampler's values, length and state are untouched. A new iteration of
the sampler (a new epoch) discards what the previous one drew but never delivered (an epoch
cut short by ``max_steps``).

An ``IterableDataset`` has no indices: a batch's ids then come from an integer ``index`` or
``idx`` entry of a dict batch (:data:`ID_KEYS`), else from a running counter that numbers the
samples of each epoch 0, 1, 2, … in the order they arrive (the same sample gets the same id
every epoch only if the stream is deterministic).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from onthefly.dataloaders import RECORDER

log = logging.getLogger(__name__)

ID_KEYS = ("index", "idx")
"""Keys of a dict batch read as the samples' ids when the dataset has no indices."""

Ids = Sequence[int] | torch.Tensor | range
"""A batch's sample ids: a list from the sampler, a tensor from the batch, or a counter range."""


class IndexRecorder:
    """The index lists one sampler yields, oldest first, for its current iteration only.

    Attributes:
        active: recording (``False`` once the taps are removed).
        generation: the number of the sampler's current iteration.
        pending: what the current iteration yielded and no batch took yet, oldest first.
    """

    def __init__(self) -> None:
        self.active = True
        self.generation = 0
        self.pending: deque[Any] = deque()

    def begin(self) -> int:
        """A new iteration of the sampler starts: what the previous one left is stale."""
        self.generation += 1
        self.pending.clear()
        return self.generation

    def drop(self, count: int) -> None:
        """Forget the ``count`` oldest index lists (batches skipped, never delivered)."""
        for _ in range(min(count, len(self.pending))):
            self.pending.popleft()

    def pop(self) -> Any:
        """The oldest undelivered index list, or ``None``."""
        return self.pending.popleft() if self.pending else None


def _recording_class(cls: type, recorder: IndexRecorder) -> type:
    def __iter__(self: Any) -> Iterator[Any]:
        generation = recorder.begin()
        for item in cls.__iter__(self):  # type: ignore[attr-defined]
            # Only while this iteration is the current one (a new one may start meanwhile);
            # read and appended here, without another call: this runs at every fetch.
            if recorder.active and generation == recorder.generation:
                recorder.pending.append(item)
            yield item

    namespace = {
        "__iter__": __iter__,
        RECORDER: recorder,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), namespace)


class SamplerTaps:
    """Records the index lists of the training loaders' samplers until :meth:`remove`.

    Example:
        >>> loader = DataLoader(list(range(10)), batch_size=4, shuffle=True)
        >>> taps = SamplerTaps()
        >>> taps.install(loader)
        True
        >>> batch = next(iter(loader))
        >>> batch.tolist() == list(taps.pop())
        True
        >>> taps.remove()
    """

    def __init__(self) -> None:
        self.recorder = IndexRecorder()
        self._swapped: list[tuple[Any, type]] = []

    def install(self, loader: Any) -> bool:
        """Record ``loader``'s index sampler; ``False`` when it has none (iterable data).

        Installing on the same sampler twice is a no-op.
        """
        if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
            return False
        sampler = loader.batch_sampler if loader.batch_sampler is not None else loader.sampler
        if any(obj is sampler for obj, _ in self._swapped):
            return True
        original = type(sampler)
        try:
            sampler.__class__ = _recording_class(original, self.recorder)
        except TypeError as exc:  # a sampler implemented in C, or with __slots__
            log.warning(
                "OnTheFly cannot record the indices of %s (%s); per-sample losses of this "
                "loader are not attributed",
                original.__name__,
                exc,
            )
            return False
        self._swapped.append((sampler, original))
        return True

    def pop(self) -> Any:
        """The next batch's index list (or single index), or ``None`` when none is waiting."""
        return self.recorder.pop()

    def remove(self) -> None:
        """Give every sampler its own class back; samplers created meanwhile stop recording."""
        self.recorder.active = False
        for sampler, original in self._swapped:
            sampler.__class__ = original
        self._swapped.clear()
        self.recorder = IndexRecorder()


def ids_from_batch(batch: Any, n: int) -> torch.Tensor | None:
    """The ids in a dict batch's ``index``/``idx`` entry, if it holds ``n`` integers."""
    if not isinstance(batch, Mapping):
        return None
    for key in ID_KEYS:
        value = batch.get(key)
        if isinstance(value, torch.Tensor) and not value.is_floating_point():
            if value.numel() == n:
                return value.detach().reshape(n).to(torch.int64)
        elif isinstance(value, (list, tuple)) and _integers(value, n):
            return torch.tensor(value, dtype=torch.int64)
    return None


def _integers(values: list[Any] | tuple[Any, ...], n: int) -> bool:
    return len(values) == n and all(isinstance(v, int) for v in values)


class Counter:
    """Numbers the samples of an epoch in arrival order (ids of iterable data without keys)."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, n: int) -> range:
        ids = range(self.next, self.next + n)
        self.next += n
        return ids
