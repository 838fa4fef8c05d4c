"""A run's stop condition (``max_epochs`` / ``max_steps``): where it is reached, how to extend it.

Each trainer keeps its limits its own way; its driver reads and writes them
(:meth:`~onthefly.drivers.base.Driver.limits`, ``set_limits``), so every function here takes
the run's :class:`~onthefly.drivers.base.Driver`, which the caller resolves once. A limit of
``-1`` means "none", as in Lightning.

An extension always adds to the planned end. Before the end, the limits can say where
that is only when the request is in the unit of the one limit the run has (``epochs`` for
a run with ``max_epochs`` only, ``steps`` for one with ``max_steps`` only); otherwise (steps
asked of a run planned in epochs, or a run with both limits) the extension is *deferred*
(:func:`defer`): the run goes on to its planned end, and there the extension is applied as
at the end of a run (:func:`apply_deferred`), so ``steps=20`` on a 60-epoch run trains 20
steps after the 60th epoch.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from onthefly.drivers.base import UNLIMITED, Driver, Limits

_DEFERRED: weakref.WeakKeyDictionary[Any, Extension] = weakref.WeakKeyDictionary()
"""Per trainer, the extension waiting for the planned end."""


@dataclass(frozen=True)
class Extension:
    """More training asked for before the planned end: ``epochs`` more epochs and ``steps``
    more optimizer steps (``None``: not asked) once the present limits are reached."""

    epochs: int | None = None
    steps: int | None = None

    def plus(self, epochs: int | None, steps: int | None) -> Extension:
        """This extension and another request together."""
        return Extension(_added(self.epochs, epochs), _added(self.steps, steps))


def _added(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def defer(run: Driver, epochs: int | None, steps: int | None) -> Extension:
    """Keep a request for the planned end of ``run``; returns what waits now."""
    waiting = _DEFERRED.get(run.trainer, Extension()).plus(epochs, steps)
    _DEFERRED[run.trainer] = waiting
    return waiting


def deferred(run: Driver) -> Extension | None:
    """The extension waiting for the planned end, if any."""
    return _DEFERRED.get(run.trainer)


def apply_deferred(run: Driver, at_epoch_end: bool = False, batch_idx: int = -1) -> bool:
    """Apply a deferred extension once the planned end is reached.

    Call at every batch end (``batch_idx``) and epoch end (``at_epoch_end``): the step
    limit is reached at a batch end, the epoch limit at the last batch (when the loader has
    a length) or else at the epoch's end.

    Returns:
        Whether an extension was applied (the limits were written).
    """
    waiting = _DEFERRED.get(run.trainer)
    if waiting is None:
        return False
    limits = run.limits()
    reached = (
        _epoch_limit_reached(run, limits) if at_epoch_end else _reached(run, limits, batch_idx)
    )
    if not reached:
        return False
    del _DEFERRED[run.trainer]
    new = extended(
        limits,
        epoch=int(run.trainer.current_epoch),
        step=int(run.trainer.global_step),
        epochs=waiting.epochs,
        steps=waiting.steps,
    )
    assert new is not None  # at the end, every request is expressible
    run.set_limits(new)
    return True


def forget_deferred(run: Driver) -> None:
    """Drop a deferred extension (the run ended before its planned end)."""
    _DEFERRED.pop(run.trainer, None)


def is_final_step(run: Driver, batch_idx: int) -> bool:
    """Whether the step that just ended (``on_train_batch_end``) is the run's last one (never
    while an extension waits for the planned end: the run goes on past it)."""
    return run.trainer not in _DEFERRED and limit_reached(run, batch_idx)


def limit_reached(run: Driver, batch_idx: int) -> bool:
    """Whether the step that just ended reaches the present limits."""
    return _reached(run, run.limits(), batch_idx)


def _reached(run: Driver, limits: Limits, batch_idx: int) -> bool:
    trainer = run.trainer
    if limits.max_steps != UNLIMITED and trainer.global_step >= limits.max_steps:
        return True
    if limits.max_epochs == UNLIMITED or trainer.current_epoch < limits.max_epochs - 1:
        return False
    return run.is_last_batch(batch_idx)


def _epoch_limit_reached(run: Driver, limits: Limits) -> bool:
    """At an epoch's end: whether the epoch limit ends the run after it."""
    return limits.max_epochs != UNLIMITED and run.trainer.current_epoch + 1 >= limits.max_epochs


def extended(
    limits: Limits,
    *,
    epoch: int,
    step: int,
    epochs: int | None,
    steps: int | None,
    at_end: bool = True,
) -> Limits | None:
    """The limits after a ``resume`` that asks for more training.

    At the end of a run (``at_end``), ``epochs=N`` trains N more epochs after the current one
    and ``steps=N`` N more optimizer steps; a limit of the other kind that would stop the
    run before the requested amount is lifted, so asking for more always gets it. Before
    the end, a request in the unit of the run's only limit moves that limit N further;
    any other request cannot be placed yet (``None``: defer it to the planned end, see
    :func:`defer`). Either way an extension never shortens the planned run.

    Args:
        limits: the limits now.
        epoch: the current epoch (0-based).
        step: optimizer steps done so far.
        epochs: extra epochs, or ``None``.
        steps: extra steps, or ``None``.
        at_end: whether the run holds at its stop condition.

    Example:
        >>> extended(Limits(2, -1), epoch=1, step=20, epochs=3, steps=None)
        Limits(max_epochs=5, max_steps=-1)
        >>> extended(Limits(60, -1), epoch=0, step=5, epochs=None, steps=20, at_end=False)
    """
    max_epochs, max_steps = limits.max_epochs, limits.max_steps
    if epochs is None and steps is None:
        return limits
    if not at_end:
        planned_in_epochs = max_epochs != UNLIMITED and max_steps == UNLIMITED
        planned_in_steps = max_steps != UNLIMITED and max_epochs == UNLIMITED
        if epochs is not None and steps is None and planned_in_epochs:
            return Limits(max(max_epochs, epoch + 1) + epochs, UNLIMITED)
        if steps is not None and epochs is None and planned_in_steps:
            return Limits(UNLIMITED, max(max_steps, step) + steps)
        return None
    if epochs is not None:
        max_epochs = epoch + 1 + epochs
        if steps is None:
            max_steps = UNLIMITED
    if steps is not None:
        max_steps = step + steps
        if epochs is None:
            max_epochs = UNLIMITED
    return Limits(max_epochs, max_steps)
