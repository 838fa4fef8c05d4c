"""The run as a health check sees it, under either driver: model, optimizers, a batch, and
one way to compute the training loss on it (the driver's
:meth:`~onthefly.drivers.base.Driver.loss_closure`):

* native ``onthefly.Trainer``: ``loss_fn(model(x), y)`` in the run's precision (as the
  default step computes it);
* ``lightning.Trainer``: the module's own ``training_step`` inside the precision plugin's
  context; its ``self.log`` calls are discarded, so a probe never shows up in the run's
  logged metrics.

The batch is the current training batch, already on the device (no data is loaded, so the
data position never moves). :func:`probing` tells other parts (e.g. a per-sample loss
recorder wrapping the loss function) that a loss computed now belongs to a probe, not to
training.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError

_state = threading.local()


def probing() -> bool:
    """Whether a health check is computing a loss on this thread right now."""
    return bool(getattr(_state, "active", False))


@contextlib.contextmanager
def _probing() -> Iterator[None]:
    before = probing()
    _state.active = True
    try:
        yield
    finally:
        _state.active = before


@dataclass
class Probe:
    """What the checks replay: the model, its optimizers, a batch and a loss function.

    Attributes:
        model: the module being trained.
        optimizers: the run's optimizers.
        batch: the current training batch, on the model's device.
        compute_loss: the training loss of a batch, with autograd on.
    """

    model: nn.Module
    optimizers: list[torch.optim.Optimizer]
    batch: Any
    compute_loss: Callable[[Any], torch.Tensor]

    def loss(self) -> torch.Tensor:
        """The training loss of :attr:`batch` (a fresh forward pass, autograd on)."""
        with _probing(), torch.enable_grad():
            loss = self.compute_loss(self.batch)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise ConfigurationError(
                f"the training step returned {type(loss).__name__} as its loss; expected a "
                "one-element tensor"
            )
        return loss

    def zero_grad(self) -> None:
        """Drop every gradient (:func:`~onthefly.health.preserve.preserved` restores them)."""
        for param in self.model.parameters():
            param.grad = None

    def step(self) -> None:
        """One step of every optimizer, without firing the run's step hooks (the native
        trainer counts steps through them)."""
        for optimizer in self.optimizers:
            with _hooks_muted(optimizer):
                optimizer.step()

    def synchronize(self) -> None:
        """Wait for the device (for timing); a no-op on the CPU."""
        device = next((p.device for p in self.model.parameters()), None)
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)


def build_probe(trainer: TrainerHost, module: Any, batch: Any, batch_idx: int) -> Probe:
    """The :class:`Probe` of a run at a batch boundary.

    Args:
        trainer: the driving trainer.
        module: the module being trained.
        batch: the current training batch (``None`` before the first one).
        batch_idx: its index in the epoch.

    Raises:
        ConfigurationError: the run cannot be probed (no batch yet, no loss function, manual
            optimization, several processes); the message says what is needed.
    """
    if int(getattr(trainer, "world_size", 1)) > 1:
        raise ConfigurationError(
            "health checks in a distributed run are not supported: every rank would have to "
            "probe the same batch; run the check in a single-process run"
        )
    if batch is None:
        raise ConfigurationError(
            "no training batch has been seen yet; expected the check after training started"
        )
    optimizers = list(getattr(trainer, "optimizers", []))
    if not optimizers:
        raise ConfigurationError("the run has no optimizer yet; expected one after fit started")
    return Probe(module, optimizers, batch, driver(trainer).loss_closure(module, batch_idx))


@contextlib.contextmanager
def _hooks_muted(optimizer: torch.optim.Optimizer) -> Iterator[None]:
    # The optimizer's step hooks are plain ordered dicts on the instance (torch >= 2.0).
    saved = optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks
    optimizer._optimizer_step_pre_hooks = type(saved[0])()
    optimizer._optimizer_step_post_hooks = type(saved[1])()
    try:
        yield
    finally:
        optimizer._optimizer_step_pre_hooks, optimizer._optimizer_step_post_hooks = saved
