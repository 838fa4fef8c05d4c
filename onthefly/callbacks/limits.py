"""A run's stop condition (``max_epochs`` / ``max_steps``): where it is reached, how to extend it.

Lightning keeps the limits on its loops (``fit_loop.max_epochs``,
``fit_loop.epoch_loop.max_steps``); the native trainer keeps them as plain attributes. A
limit of ``-1`` means "none", as in Lightning.
"""

from __future__ import annotations

from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

from onthefly.callbacks._driver import is_lightning

UNLIMITED = -1


@dataclass(frozen=True)
class Limits:
    """``max_epochs`` and ``max_steps``, each ``-1`` when there is none."""

    max_epochs: int
    max_steps: int


def _as_limit(value: Any) -> int:
    return UNLIMITED if value is None or value < 0 else int(value)


def read_limits(trainer: Any) -> Limits:
    """The trainer's current limits."""
    if is_lightning(trainer):
        fit_loop = trainer.fit_loop
        return Limits(_as_limit(fit_loop.max_epochs), _as_limit(fit_loop.epoch_loop.max_steps))
    return Limits(_as_limit(trainer.max_epochs), _as_limit(trainer.max_steps))


def write_limits(trainer: Any, limits: Limits) -> None:
    """Change the limits of a running fit; the loop picks them up at its next check."""
    if is_lightning(trainer):
        trainer.fit_loop.max_epochs = limits.max_epochs
        trainer.fit_loop.epoch_loop.max_steps = limits.max_steps
    else:  # the native trainer spells "no epoch limit" None
        trainer.max_epochs = None if limits.max_epochs == UNLIMITED else limits.max_epochs
        trainer.max_steps = limits.max_steps


def is_final_step(trainer: Any, batch_idx: int) -> bool:
    """Whether the step that just ended (``on_train_batch_end``) is the run's last one."""
    limits = read_limits(trainer)
    if limits.max_steps != UNLIMITED and trainer.global_step >= limits.max_steps:
        return True
    if limits.max_epochs == UNLIMITED or trainer.current_epoch < limits.max_epochs - 1:
        return False
    return _is_last_batch(trainer, batch_idx)


def _is_last_batch(trainer: Any, batch_idx: int) -> bool:
    if is_lightning(trainer):
        # Lightning knows it even for loaders without a length (it fetches one batch ahead).
        return bool(trainer.fit_loop.epoch_loop.batch_progress.is_last_batch)
    loader = getattr(trainer, "train_loader", None)
    return isinstance(loader, Sized) and batch_idx + 1 >= len(loader)


def extended(
    limits: Limits,
    *,
    epoch: int,
    step: int,
    epochs: int | None,
    steps: int | None,
    at_end: bool = True,
) -> Limits:
    """The limits after a ``resume`` that asks for more training.

    At the end of a run (``at_end``), ``epochs=N`` trains N more epochs after the current one
    and ``steps=N`` N more optimizer steps. Before the end, the same request moves a finite
    limit N further, so an extension never shortens the planned run. A limit of the other
    kind that would stop the run before the requested amount is lifted, so asking for more
    always gets it.

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
    """
    max_epochs, max_steps = limits.max_epochs, limits.max_steps
    if epochs is not None:
        max_epochs = _further(max_epochs, epoch + 1, epochs, at_end)
        if steps is None and max_steps != UNLIMITED:
            max_steps = UNLIMITED
    if steps is not None:
        max_steps = _further(max_steps, step, steps, at_end)
        if epochs is None:
            max_epochs = UNLIMITED
    return Limits(max_epochs, max_steps)


def _further(limit: int, reached: int, extra: int, at_end: bool) -> int:
    base = reached if at_end or limit == UNLIMITED else max(limit, reached)
    return base + extra
