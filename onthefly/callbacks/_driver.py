"""Which trainer drives the callbacks: ``lightning.Trainer`` or the native ``onthefly.Trainer``.

Both satisfy :class:`~onthefly.callbacks.host.TrainerHost`; the few places where they differ
(where the limits live, how logged values are cached) ask here.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch import Trainer as LightningTrainer


def is_lightning(trainer: Any) -> bool:
    """Whether ``trainer`` is a ``lightning.pytorch.Trainer``."""
    return isinstance(trainer, LightningTrainer)
