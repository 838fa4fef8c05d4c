"""The random state a loader's iteration draws from, and keeping it as it was.

Iterating a ``DataLoader`` draws from torch's global generator unless the loader or its
sampler has a generator of its own: ``DataLoader(generator=g)`` draws its workers' base seed
from ``g`` (and hands ``g`` to the ``RandomSampler`` it makes for ``shuffle=True``), a
sampler's ``generator`` attribute draws its order (``RandomSampler``,
``SubsetRandomSampler``, ``WeightedRandomSampler`` and custom samplers that follow the same
convention), and a ``DistributedSampler`` derives its order from its ``seed`` and ``epoch``.
:func:`capture` takes all of it together with the global generators (:mod:`~.rng`);
:func:`restore` puts it back; :func:`preserved` leaves it untouched around a block.

A captured state is a dict of tensors, ints and tuples (``weights_only``-safe). The loader's
part is positional: the same code builds the same loaders, whose generators are found in
the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from onthefly.sessions import rng
from onthefly.sessions.rng import RngState

log = logging.getLogger(__name__)

OWN = "loader"
"""The key of a captured state's loader part (absent when the loader has nothing of its own)."""


def _parts(loader: Any) -> list[Any]:
    """The loader and the samplers it iterates, outermost first."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    candidates = [
        loader,
        getattr(loader, "sampler", None),
        batch_sampler,
        getattr(batch_sampler, "sampler", None),
    ]
    parts: list[Any] = []
    seen: set[int] = set()
    for part in candidates:  # plain and cheap: this runs before each fetch of a Lightning run
        if part is not None and id(part) not in seen:
            seen.add(id(part))
            parts.append(part)
    return parts


def generators(loader: Any) -> list[torch.Generator]:
    """The generators of ``loader`` and its samplers, each once, in a fixed order.

    Example:
        >>> g = torch.Generator().manual_seed(1)
        >>> loader = torch.utils.data.DataLoader(range(8), shuffle=True, generator=g)
        >>> generators(loader) == [g]
        True
    """
    return _generators_of(_parts(loader))


def _generators_of(parts: list[Any]) -> list[torch.Generator]:
    found: list[torch.Generator] = []
    for part in parts:
        generator = getattr(part, "generator", None)
        if isinstance(generator, torch.Generator) and not any(generator is g for g in found):
            found.append(generator)
    return found


def _epoch_samplers(parts: list[Any]) -> list[Any]:
    """Samplers whose order follows ``set_epoch`` (``DistributedSampler`` and the like), of
    a loader's :func:`_parts`."""
    return [
        part
        for part in parts[1:]
        if callable(getattr(part, "set_epoch", None))
        and isinstance(getattr(part, "epoch", None), int)
    ]


class OwnGenerators:
    """A loader's own generators and epoch-driven samplers, looked up once.

    Looking them up takes ~20 µs in a training step (a dozen attribute reads on the loader
    and its samplers); a loader keeps them while an epoch runs, so a fetch ahead of training
    reads only their state (:meth:`state`), and the next epoch looks them up again.

    Args:
        loader: the loader (any object; one without generators has none).
    """

    def __init__(self, loader: Any) -> None:
        parts = _parts(loader)
        self.generators = _generators_of(parts)
        self.samplers = _epoch_samplers(parts)

    def state(self) -> dict[str, Any] | None:
        """Their state now (``None``: the loader has none); see :func:`own_state`."""
        if not self.generators and not self.samplers:
            return None
        return {
            "generators": [g.get_state() for g in self.generators],
            "samplers": [(int(s.epoch), int(getattr(s, "seed", 0))) for s in self.samplers],
        }


def own_state(loader: Any) -> dict[str, Any] | None:
    """The state of ``loader``'s own generators and epoch-driven samplers (``None``: none)."""
    return OwnGenerators(loader).state()


def restore_own(loader: Any, state: dict[str, Any] | None) -> None:
    """Put ``loader``'s own generators and samplers back to :func:`own_state`'s ``state``."""
    if state is None:
        return
    parts = _parts(loader)
    found = _generators_of(parts)
    saved = list(state.get("generators", ()))
    samplers = _epoch_samplers(parts)
    saved_samplers = list(state.get("samplers", ()))
    if len(saved) != len(found) or len(saved_samplers) != len(samplers):
        log.warning(
            "the training loader has %d generator(s) and %d epoch-driven sampler(s), the saved "
            "state %d and %d: the loader is not built as in the exported run, so its data order "
            "is not restored exactly",
            len(found),
            len(samplers),
            len(saved),
            len(saved_samplers),
        )
    for generator, generator_state in zip(found, saved, strict=False):
        generator.set_state(generator_state)
    for sampler, (epoch, seed) in zip(samplers, saved_samplers, strict=False):
        sampler.epoch = int(epoch)
        if hasattr(sampler, "seed"):
            sampler.seed = int(seed)


def capture(
    loader: Any,
    cuda: bool = True,
    only: frozenset[str] = rng.GLOBAL,
    own: OwnGenerators | None = None,
) -> RngState:
    """Every global generator's state plus ``loader``'s own (see :func:`own_state`).

    Args:
        loader: the loader (any object; one without generators adds nothing).
        cuda: include the CUDA generators (see :func:`onthefly.sessions.rng.capture`).
        only: the global CPU generators to include (see there).
        own: ``loader``'s own generators, looked up before (``None``: looked up now).
    """
    state = rng.capture(cuda=cuda, only=only)
    loader_state = (own if own is not None else OwnGenerators(loader)).state()
    if loader_state is not None:
        state[OWN] = loader_state
    return state


def restore(loader: Any, state: RngState) -> None:
    """Put the global generators and ``loader``'s own back to ``state`` (from :func:`capture`;
    a state without a loader part leaves the loader's generators as they are)."""
    rng.restore(state)
    restore_own(loader, state.get(OWN))


@contextmanager
def preserved(loaders: Iterable[Any]) -> Iterator[None]:
    """Leave every generator as it was: the global ones and those of ``loaders``.

    For what runs beside training (a test, a scan, a fork, a health check): whatever it
    draws, training afterwards draws exactly what it would have drawn without it.

    Args:
        loaders: the run's loaders (objects without generators are skipped).

    Example:
        >>> with preserved([]):
        ...     _ = torch.rand(3)  # the global generator is put back afterwards
    """
    kept = [(loader, own_state(loader)) for loader in loaders]
    saved = rng.capture()
    try:
        yield
    finally:
        rng.restore(saved)
        for loader, own in kept:
            restore_own(loader, own)
