"""The control group: the collectives OnTheFly itself runs between the ranks of a run.

A gloo group of its own, created on every rank when the run starts, so that

* OnTheFly's collectives move CPU tensors whatever the training backend: reading rank 0's
  decision is never a device sync, with NCCL neither;
* they have OnTheFly's timeout (``ONTHEFLY_DIST_TIMEOUT`` seconds, default 300), whatever
  the training's process group uses;
* a collective that fails (a peer died: gloo notices at once) or times out (a peer hung)
  becomes a :class:`~onthefly.errors.DistributedError` that names the rank, the operation,
  the time waited and the timeout, instead of a silent wait.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from onthefly import environment
from onthefly.errors import DistributedError

log = logging.getLogger(__name__)

TIMEOUT_ENV = "ONTHEFLY_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 300.0

T = TypeVar("T")


def timeout_s() -> float:
    """The collective timeout in seconds: ``ONTHEFLY_DIST_TIMEOUT``, else 300.

    An invalid value is reported and ignored (the run goes on with the default).
    """
    return environment.positive_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def is_collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is torch.distributed reporting a failed or timed-out collective."""
    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    if not isinstance(exc, RuntimeError):
        return False
    text = str(exc)
    return any(mark in text for mark in ("gloo", "NCCL", "c10d", "Connection reset", "Timed out"))


class ControlGroup:
    """OnTheFly's own gloo group over every rank of the run.

    Create it with :meth:`join` on every rank at the same point (group creation is a
    collective). Every method is a collective too: all ranks call it, in the same order.

    Attributes:
        rank: this process's global rank.
        world_size: the number of ranks.
        backend: the training's backend (the default group's), for reports.
        timeout_s: how long a collective may wait for the other ranks.
        last_collective: Unix time when the last collective of this group completed.

    Example:
        >>> group = ControlGroup.join()  # doctest: +SKIP
        >>> group.broadcast_ints([1, 2] if group.rank == 0 else None, 2, "demo")  # doctest: +SKIP
        [1, 2]
    """

    def __init__(self, group: Any, rank: int, world_size: int, backend: str, timeout: float):
        self._group = group
        self.rank = rank
        self.world_size = world_size
        self.backend = backend
        self.timeout_s = timeout
        self.last_collective = time.time()

    @classmethod
    def join(cls, timeout: float | None = None) -> ControlGroup:
        """Create the group (call on every rank of an initialised default process group).

        Raises:
            DistributedError: the group could not be formed (a rank is missing).
        """
        timeout = timeout_s() if timeout is None else timeout
        rank, world = dist.get_rank(), dist.get_world_size()
        backend = str(dist.get_backend())
        created = _checked(
            rank,
            "creation of the control group",
            timeout,
            lambda: dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout)),
        )
        return cls(created, rank, world, backend, timeout)

    @property
    def is_zero(self) -> bool:
        """Whether this is global rank 0 (the rank that decides)."""
        return self.rank == 0

    def broadcast_ints(self, values: list[int] | None, count: int, what: str) -> list[int]:
        """Rank 0's ``count`` integers on every rank (``values`` is ignored elsewhere).

        Done as a sum over the ranks (the others add zeros) rather than a broadcast: a
        broadcast's root does not wait for the receivers, so rank 0 would never notice a
        hung rank while paused; with an all-reduce every rank waits for every other.
        """
        box = torch.zeros(count, dtype=torch.int64)
        if self.rank == 0:
            assert values is not None and len(values) == count
            box.copy_(torch.tensor(values, dtype=torch.int64))
        self._run(what, lambda: dist.all_reduce(box, group=self._group))
        return [int(v) for v in box.tolist()]

    def broadcast_objects(self, objects: list[Any], what: str) -> list[Any]:
        """Rank 0's picklable ``objects`` on every rank (other ranks pass a list of the same
        length; its items are replaced)."""
        self._run(what, lambda: dist.broadcast_object_list(objects, src=0, group=self._group))
        return objects

    def broadcast_tensor(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        """Rank 0's ``tensor`` (a CPU tensor) copied into every other rank's, in place."""
        self._run(what, lambda: dist.broadcast(tensor, src=0, group=self._group))
        return tensor

    def gather(self, value: Any, what: str) -> list[Any] | None:
        """Every rank's picklable ``value``, indexed by rank, on rank 0; ``None`` elsewhere."""
        out: list[Any] | None = [None] * self.world_size if self.rank == 0 else None
        self._run(what, lambda: dist.gather_object(value, out, dst=0, group=self._group))
        return out

    def _run(self, what: str, collective: Callable[[], Any]) -> None:
        _checked(self.rank, what, self.timeout_s, collective)
        self.last_collective = time.time()


def _checked(rank: int, what: str, timeout: float, collective: Callable[[], T]) -> T:
    started = time.monotonic()
    try:
        return collective()
    except RuntimeError as exc:
        waited = time.monotonic() - started
        limit = f"timeout {timeout:.0f} s, {TIMEOUT_ENV}"
        raise failure(rank, f"{what} after {waited:.1f} s ({limit})", exc) from exc


def failure(rank: int, what: str, exc: BaseException) -> DistributedError:
    """The :class:`DistributedError` for ``what`` on ``rank``, which raised ``exc``.

    Example:
        >>> str(failure(0, "control round", RuntimeError("Connection reset by peer")))[:58]
        'rank 0: the control round with the other ranks failed: Co'
    """
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return DistributedError(
        f"rank {rank}: the {what} with the other ranks failed: {first[:300]}. Another rank has "
        "probably died or hung; its own output says why"
    )
