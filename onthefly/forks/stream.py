"""ForkStream: the small callback a fork trains with, under either driver.

It streams the fork's training as a run of its own: a ``metrics`` event per optimizer step
(numbered on from the parent's step, so a fork's curve branches off its parent's), a
``fork_progress`` event about every 0.25 s, and it stops the fork (``should_stop``) when
``cancelled()`` says so, checked after every batch. Losses stay on the device and reach the
host in one copy per flush, never one per step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from lightning.pytorch import Callback

from onthefly.drivers.base import TrainerHost
from onthefly.protocol import EventBody, ForkProgressBody, ForkState, MetricsBody

Publish = Callable[[EventBody], None]
"""Sends an event of the fork's run."""

FLUSH_EVERY = 32
"""Steps whose losses are gathered on the device before one copy to the host."""

PROGRESS_EVERY_S = 0.25


class ForkStream(Callback):
    """Publishes one fork's metrics and progress, and stops it when cancelled.

    Args:
        publish: sends an event of the fork's run.
        name: the fork's name (in ``fork_progress`` events).
        first_step: the parent's step: the fork's step ``k`` is published as ``first_step + k``.
        total: the steps of the fork's budget, when known.
        cancelled: checked after every batch; ``True`` stops the fork.

    Attributes:
        cancelled_at: the fork's step when it was cancelled, else ``None``.
        steps: optimizer steps the fork has taken.
        loss: its latest training loss, once flushed.
    """

    def __init__(
        self,
        publish: Publish,
        name: str,
        first_step: int,
        total: int | None,
        cancelled: Callable[[], bool],
    ) -> None:
        self.publish = publish
        self.name = name
        self.first_step = first_step
        self.total = total
        self.cancelled = cancelled
        self.cancelled_at: int | None = None
        self.steps = 0
        self.loss: float | None = None
        self._pending: list[tuple[int, int, torch.Tensor]] = []
        self._started = time.perf_counter()
        self._last_report = 0.0

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self._started

    def on_train_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._started = time.perf_counter()
        self.progress("running")

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        step = int(trainer.global_step)
        loss = _loss(outputs)
        if step > self.steps and loss is not None:  # an optimizer step was taken
            self._pending.append((step, int(trainer.current_epoch), loss))
        self.steps = step
        if self.cancelled():
            self.cancelled_at = step
            trainer.should_stop = True
        now = time.perf_counter()
        if len(self._pending) >= FLUSH_EVERY or now - self._last_report >= PROGRESS_EVERY_S:
            self._last_report = now
            self.flush(trainer.callback_metrics)
            self.progress("running")

    def on_train_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush(trainer.callback_metrics)

    def flush(self, logged: Mapping[str, Any] | None = None) -> None:
        """Publish the losses gathered so far (one host copy); the last step also carries the
        other scalars the fork logged."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        values = torch.stack([loss.float() for _, _, loss in pending]).tolist()
        extra = _scalars(logged or {})
        for i, ((step, epoch, _), value) in enumerate(zip(pending, values, strict=True)):
            metrics = {"loss": value, **(extra if i == len(pending) - 1 else {})}
            self.publish(MetricsBody(step=self.first_step + step, epoch=epoch, values=metrics))
        self.loss = values[-1]

    def progress(self, state: ForkState, message: str | None = None) -> None:
        """Publish a ``fork_progress`` event in ``state``."""
        self.publish(
            ForkProgressBody(
                fork=self.name,
                state=state,
                step=self.steps,
                total=self.total,
                loss=self.loss,
                elapsed=self.elapsed,
                message=message,
            )
        )


def _loss(outputs: Any) -> torch.Tensor | None:
    value = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.detach().reshape(())
    return None


def _scalars(logged: Mapping[str, Any]) -> dict[str, float]:
    """The logged one-value tensors and numbers besides the loss (read at a flush only)."""
    values: dict[str, float] = {}
    for key, value in logged.items():
        if key == "loss":
            continue
        tensor = isinstance(value, torch.Tensor) and value.numel() == 1
        if tensor or (isinstance(value, int | float) and not isinstance(value, bool)):
            values[key] = float(value)
    return values
