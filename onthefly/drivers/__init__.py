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
    if isinstance(trainer, LightningTrainer):
        return LightningDriver(trainer)
    return NativeDriver(trainer)


__all__ = ["Driver", "driver"]
