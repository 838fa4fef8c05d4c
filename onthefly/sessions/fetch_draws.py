"""Which global generators a training loader's fetches draw from, learned by watching them.

A fetch that runs ahead of training (Lightning's fit loop always fetches one batch ahead)
keeps the RNG state it started from, so that an export before the batch is trained can
replay it (:mod:`~.data_position`). In full that state costs ~50 µs a fetch, ~45 of them
for Python's and NumPy's generators (624-word states, copied word by word); torch's alone
costs ~2 µs. Most pipelines draw only from torch at fetch time (samplers, torchvision's
transforms), or from nothing, so :class:`FetchDraws` keeps Python's and NumPy's states only
for a loader whose fetches were seen drawing from them:

* the first ``LEARN`` fetches of a loader are watched: the full state is kept before and
  compared after each;
* once they left Python's and NumPy's generators untouched, fetches keep torch's state and
  the loader's own generators only, and every ``CHECK_EVERY``-th fetch is watched again;
* a fetch seen drawing from either turns the full state on for the rest of the run (a
  warning says so when that is seen only after the first fetches).

Replaying a fetch with torch's state alone is exact for a fetch that draws nothing from
Python or NumPy, whatever state they are in. A pipeline that draws from them only now and
then (one fetch in thousands) may go unseen, and an export right before such a fetch then
replays it with other numbers.
"""

from __future__ import annotations

import logging
from typing import Any

from onthefly.sessions import loader_rng, rng
from onthefly.sessions.rng import RngState

log = logging.getLogger(__name__)

LEARN = 8
"""Fetches watched in full at first."""

CHECK_EVERY = 64
"""Afterwards, every this many fetches one is watched again."""


class FetchDraws:
    """The RNG state to keep before each fetch of one loader, learning what its fetches draw.

    Example:
        >>> draws = FetchDraws()
        >>> state = draws.before(loader)  # doctest: +SKIP
        >>> batch = next(iterator); draws.after()  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.fetches = 0
        self.full = False
        self._watched: RngState | None = None

    def before(self, loader: Any) -> RngState:
        """The state to keep for the fetch about to run (call :meth:`after` once it ran)."""
        self.fetches += 1
        watch = not self.full and (self.fetches <= LEARN or self.fetches % CHECK_EVERY == 0)
        state = loader_rng.capture(loader, cuda=False, python_numpy=self.full or watch)
        self._watched = state if watch else None
        return state

    def after(self) -> None:
        """The fetch ran: if it was watched, see whether it drew from Python or NumPy."""
        watched, self._watched = self._watched, None
        if watched is None or rng.same_python_numpy(watched, rng.capture(cuda=False)):
            return
        self.full = True
        if self.fetches > LEARN:
            log.warning(
                "fetch %d of the training data drew from Python's or NumPy's random "
                "generator, the first %d did not: from now on their state is kept before "
                "every fetch; an export made before this point resumes with exact data "
                "only if no fetch in between drew from them",
                self.fetches,
                LEARN,
            )
