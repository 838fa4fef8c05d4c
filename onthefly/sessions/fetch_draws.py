"""Which global generators a training loader's fetches draw from, learned by watching them.

A fetch that runs ahead of training (Lightning's fit loop always fetches one batch ahead)
keeps the RNG state it started from, so that an export before the batch is trained can
replay it (:mod:`~.data_position`). In full that state costs ~50 µs a fetch, ~45 of them
for Python's and NumPy's generators (624-word states, copied word by word). Most pipelines
draw from one generator at fetch time (torch's: torchvision's transforms), or from none (a
sampler draws its order at the epoch's first fetch only), so :class:`FetchDraws` keeps
only the states of the global generators a loader's fetches were seen drawing from, besides
the loader's own generators:

* an epoch's first fetch keeps every state, and teaches nothing (the sampler draws there);
* the next ``LEARN`` fetches of a loader are watched: every state is kept before and
  compared after;
* afterwards a fetch keeps the states of the generators seen drawing so far, and every
  ``CHECK_EVERY``-th fetch is watched again; a generator seen drawing is kept from then on
  (a warning says so when it is seen only after the first fetches).

Replaying a fetch without a generator's state is exact when the fetch draws nothing from
that generator, whatever its state. A pipeline that draws from one only now and then (one
fetch in thousands) may go unseen, and an export right before such a fetch then replays it
with other numbers.
"""

from __future__ import annotations

import logging
from typing import Any

from onthefly.sessions import loader_rng, rng
from onthefly.sessions.rng import RngState

log = logging.getLogger(__name__)

LEARN = 8
"""Fetches watched in full after an epoch's first."""

CHECK_EVERY = 64
"""Afterwards, every this many fetches one is watched again."""


class FetchDraws:
    """The RNG state to keep before each fetch of one loader, learning what its fetches draw.

    Attributes:
        drawn: the global generators (names of :data:`~.rng.GLOBAL`) seen drawing in a fetch.

    Example:
        >>> draws = FetchDraws()
        >>> state = draws.before(loader, first=False)  # doctest: +SKIP
        >>> batch = next(iterator); draws.after()  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.fetches = 0
        self.drawn: frozenset[str] = frozenset()
        self._watched: RngState | None = None
        self._own: loader_rng.OwnGenerators | None = None  # the epoch's loader's

    def before(self, loader: Any, first: bool) -> RngState:
        """The state to keep for the fetch about to run (call :meth:`after` once it ran).

        Args:
            loader: the loader whose own generators are kept too.
            first: the epoch's first fetch (kept in full, not learned from).
        """
        if first or self._own is None:
            self._own = loader_rng.OwnGenerators(loader)
        if first:
            self._watched = None
            return loader_rng.capture(loader, cuda=False, own=self._own)
        self.fetches += 1
        watch = self.drawn != rng.GLOBAL and (
            self.fetches <= LEARN or self.fetches % CHECK_EVERY == 0
        )
        only = rng.GLOBAL if watch else self.drawn
        state = loader_rng.capture(loader, cuda=False, only=only, own=self._own)
        self._watched = state if watch else None
        return state

    def forget(self, loader: Any) -> None:
        """An epoch's first fetch ran without a state kept (see
        :attr:`~.data_position.TrackedIterator.adjacent`): look the loader's own generators up
        again, as :meth:`before` would have."""
        self._own = loader_rng.OwnGenerators(loader)
        self._watched = None

    def after(self) -> None:
        """The fetch ran: if it was watched, note the generators it drew from."""
        watched, self._watched = self._watched, None
        if watched is None:
            return
        new = rng.changed(watched, rng.capture(cuda=False)) - self.drawn
        if not new:
            return
        self.drawn |= new
        if self.fetches > LEARN:
            log.warning(
                "fetch %d of the training data drew from the %s random generator(s), the "
                "first %d did not: from now on their state is kept before every fetch; an "
                "export made before this point resumes with exact data only if no fetch in "
                "between drew from them",
                self.fetches,
                " and ".join(sorted(new)),
                LEARN,
            )
