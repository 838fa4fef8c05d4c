"""The one seam between OnTheFly's callbacks and the trainer that runs them.

:func:`driver` answers, for a trainer, the :class:`~onthefly.drivers.base.Driver` that knows
it: :class:`~onthefly.drivers.lightning.LightningDriver` for a ``lightning.pytorch.Trainer``,
:class:`~onthefly.drivers.native.NativeDriver` for anything else (the native
``onthefly.Trainer``). This is the only place that asks which trainer runs.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Trainer as LightningTrainer

from onthefly.drivers.base import Driver
from onthefly.drivers.lightning import LightningDriver
from onthefly.drivers.native import NativeDriver


def driver(trainer: Any) -> Driver:
    """The driver of ``trainer``.

    Args:
        trainer: a ``lightning.pytorch.Trainer`` or an ``onthefly.Trainer``.

    Example:
        >>> driver(lightning.Trainer()).name  # doctest: +SKIP
        'lightning'
    """
    # Several parts ask at every step: the driver is kept on the trainer itself (a
    # driver holds nothing but its trainer; kept elsewhere, it would keep a finished run).
    state = getattr(trainer, "__dict__", None)
    found = None if state is None else state.get(_KEPT_AS)
    if found is None:
        found = (
            LightningDriver(trainer)
            if isinstance(trainer, LightningTrainer)
            else NativeDriver(trainer)
        )
        if state is not None:
            state[_KEPT_AS] = found
    return found


_KEPT_AS = "_onthefly_driver"
"""The trainer attribute its driver is kept under."""


__all__ = ["Driver", "driver"]
