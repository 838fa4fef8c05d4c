"""``StepState``: what a custom training or validation step gets besides the batch."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from onthefly.native.hooks import Hooks
from onthefly.native.precision import Autocast


@dataclass
class StepState(Mapping[str, Any]):
    """The run as a step function sees it; one object per run, updated before each call.

    Each field reads as an attribute (``state.model``) or as a key (``state["model"]``, the
    spelling of steps written for the original OnTheFly); ``dict(state)`` lists them all.

    Attributes:
        model: the user's model, already on ``device``.
        optimizer: the user's optimizer.
        loss_fn: the user's loss function (``None`` if ``fit`` got none).
        device: where the model and the batch are.
        autocast: a re-enterable context manager; a no-op at ``precision="32"``.
        scaler: a ``torch.amp.GradScaler``, enabled only for ``"16-mixed"`` on CUDA; disabled it
            passes through, so ``scaler.scale(loss).backward(); scaler.step(opt);
            scaler.update()`` is correct at every precision.
        scheduler: the user's LR scheduler or ``None``. With a custom step the trainer still
            steps it per ``scheduler_interval``.
        metrics: this stage's torchmetrics (train, validation or test copies). A custom step
            updates them itself; the trainer computes and resets them at the end of the epoch.
        step: optimizer steps taken so far (``trainer.global_step``).
        epoch: the current epoch (``trainer.current_epoch``).
        batch_idx: the batch's index within the epoch (or within its evaluation loader).
        dataloader_idx: in an evaluation, the index of the loader the batch comes from
            (``0`` with one loader).

    Example:
        >>> @trainer.training_step
        ... def step(batch, state):
        ...     x, y = batch
        ...     with state.autocast:
        ...         loss = state.loss_fn(state.model(x), y)
        ...     state.backward(loss)
        ...     state.scaler.step(state.optimizer)
        ...     state.scaler.update()
        ...     state.optimizer.zero_grad()
        ...     return {"loss": loss}

        The same step as a mapping:

        >>> @trainer.training_step
        ... def step(batch, state):
        ...     x, y = batch
        ...     with state["autocast"]:
        ...         loss = state["loss_fn"](state["model"](x.to(state["device"])), y)
        ...     state["scaler"].scale(loss).backward()
        ...     state["scaler"].step(state["optimizer"])
        ...     state["scaler"].update()
        ...     state["optimizer"].zero_grad()
        ...     return {"loss": loss.detach()}
    """

    model: nn.Module
    optimizer: torch.optim.Optimizer
    loss_fn: Callable[..., torch.Tensor] | None
    device: torch.device
    autocast: Autocast
    scaler: torch.amp.GradScaler
    scheduler: Any
    metrics: dict[str, Any] = field(default_factory=dict)
    step: int = 0
    epoch: int = 0
    batch_idx: int = 0
    dataloader_idx: int = 0
    _hooks: Hooks | None = field(default=None, repr=False)

    def __getitem__(self, key: str) -> Any:
        if key not in _KEYS:
            raise KeyError(f"{key!r}: the step state has no such field; expected one of {_KEYS}")
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_KEYS)

    def __len__(self) -> int:
        return len(_KEYS)

    def backward(self, loss: torch.Tensor) -> None:
        """``scaler.scale(loss).backward()`` between the ``on_before_backward`` and
        ``on_after_backward`` hooks (a plain ``loss.backward()`` works too, without those hooks).

        Args:
            loss: the loss to differentiate.
        """
        if self._hooks is None:
            self.scaler.scale(loss).backward()
            return
        hooks = self._hooks.step  # the batch in progress's (see StepHooks)
        for hook in hooks.before_backward:
            hook(hooks.trainer, hooks.model, loss)
        self.scaler.scale(loss).backward()
        for hook in hooks.after_backward:
            hook(hooks.trainer, hooks.model)


_KEYS = tuple(f.name for f in fields(StepState) if not f.name.startswith("_"))
"""The fields a step may read as keys."""
