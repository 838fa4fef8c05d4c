"""The trainer surface OnTheFly's callbacks may touch.

Both drivers satisfy it: ``lightning.pytorch.Trainer`` and the native
:class:`onthefly.Trainer`. A callback that needs anything else does not belong in
``onthefly/callbacks/``.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class TrainerHost(Protocol):
    """Attributes a callback reads or writes on whichever trainer drives it."""

    current_epoch: int
    global_step: int
    should_stop: bool
    max_epochs: int | None
    max_steps: int
    callback_metrics: dict[str, Any]
    is_global_zero: bool
    global_rank: int
    world_size: int

    @property
    def lightning_module(self) -> Any: ...
