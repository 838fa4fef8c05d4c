"""Making and training one fork: a real copy of the model, trained on a slice, parent untouched.

* the fork's data: a loader over its slice (:mod:`onthefly.forks.slice_loader`).
* :func:`model_copy` and :func:`fork_optimizer` — a deep copy of the model (a
  ``LightningModule`` is copied without its trainer) and an optimizer of the parent's class
  over the copy's parameters: ``fresh`` (the parent's param groups and hyperparameters, empty
  state) or ``clone`` (its state too, deep-copied).
* :func:`train_fork` — trains the copy while the parent stays paused: under the native
  trainer with a nested :class:`onthefly.Trainer` (no session; the parent's custom training
  step, device, precision and clipping; one process even in a distributed run: no collective,
  no DDP wrapper, no metric synchronisation), under Lightning with a short nested
  ``lightning.Trainer.fit`` of the module copy (the user's ``training_step``; the parent's
  accelerator, device, precision, clipping and accumulation; no logger, checkpoints,
  validation or progress bar).

Around the training every random generator is forked (torch CPU and CUDA, NumPy, ``random``),
the per-sample capture of the parent's batch is set aside, and grad mode is put back, so the
parent's weights, optimizer, RNG streams, grad scaler and data position are as before.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from lightning.pytorch.utilities.seed import isolate_rng
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm
from torch.utils.data import DataLoader

from onthefly.drivers import driver
from onthefly.drivers.base import Budget, TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.forks.slice_loader import batch_size_of
from onthefly.forks.stream import ForkStream
from onthefly.protocol import ForkState
from onthefly.samples.slot import arm, armed_slot

log = logging.getLogger(__name__)


@dataclass
class ForkOutcome:
    """How a fork's training ended: ``done``, ``cancelled`` or ``failed`` (with ``message``)."""

    status: ForkState
    steps: int
    duration: float
    message: str | None = None


# ---------------------------------------------------------------------------- the model


def model_copy(model: nn.Module) -> nn.Module:
    """An independent deep copy (same device); a ``LightningModule`` is copied without its
    trainer, and the copy holds no gradients."""
    twin = copy.deepcopy(model)
    for param in twin.parameters():
        param.grad = None
    return twin


def fork_optimizer(
    parent: torch.optim.Optimizer,
    parent_model: nn.Module,
    model: nn.Module,
    mode: str = "fresh",
    lr: float | None = None,
    params: list[nn.Parameter] | None = None,
) -> torch.optim.Optimizer:
    """An optimizer of ``parent``'s class for ``model``, a copy of ``parent_model``.

    Args:
        parent: the run's optimizer (over ``parent_model``'s parameters); never changed.
        parent_model: the run's model.
        model: its copy (same parameter order).
        mode: ``fresh``: the parent's param groups and hyperparameters, no state; ``clone``:
            also a deep copy of its state (moments, step counts).
        lr: every group's learning rate instead of the parent's current one.
        params: train only these (adapters): one group with the first group's
            hyperparameters (``fresh`` only).

    Raises:
        ConfigurationError: the optimizer holds parameters outside the model, or its class
            cannot be rebuilt from its defaults.
    """
    settings = [{k: v for k, v in g.items() if k != "params"} for g in parent.param_groups]
    if params is not None:
        groups = [{**settings[0], "params": list(params)}]
    else:
        pairs = zip(parent_model.parameters(), model.parameters(), strict=True)
        twin_of = {id(p): q for p, q in pairs}
        try:
            groups = [
                {**setting, "params": [twin_of[id(p)] for p in group["params"]]}
                for setting, group in zip(settings, parent.param_groups, strict=True)
            ]
        except KeyError:
            raise ConfigurationError(
                "the optimizer holds parameters that are not the model's; expected an optimizer "
                "over the model's parameters only"
            ) from None
    # Each group carries every hyperparameter; the defaults the constructor takes are passed
    # too (some are recorded in ``defaults`` without being constructor arguments).
    accepted = inspect.signature(type(parent)).parameters
    try:
        optimizer = type(parent)(
            groups, **{k: v for k, v in parent.defaults.items() if k in accepted}
        )
    except TypeError as exc:
        raise ConfigurationError(
            f"cannot make a {type(parent).__name__} for the fork from its defaults ({exc})"
        ) from None
    if mode == "clone":
        optimizer.load_state_dict(copy.deepcopy(parent.state_dict()))
    if lr is not None:
        for group in optimizer.param_groups:
            group["lr"] = lr
    return optimizer


# ---------------------------------------------------------------------------- training


@contextlib.contextmanager
def parent_untouched() -> Iterator[None]:
    """Fork every RNG, set aside the parent batch's per-sample capture, keep grad mode."""
    slot = armed_slot()
    arm(None)
    grad = torch.is_grad_enabled()
    try:
        with isolate_rng():
            yield
    finally:
        torch.set_grad_enabled(grad)
        arm(slot)


def train_fork(
    trainer: TrainerHost,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: DataLoader,
    budget: Budget,
    stream: ForkStream,
) -> ForkOutcome:
    """Train ``model`` (a copy) on ``loader`` for ``budget``, beside the paused ``trainer``.

    An exception in the fork (the user's step, out of memory) ends it as ``failed`` with the
    message; it never reaches the parent run.
    """
    started = time.perf_counter()
    if stream.cancelled():  # cancelled before its first step
        return ForkOutcome("cancelled", 0, 0.0)
    train_copy = driver(trainer).train_copy
    try:
        with parent_untouched():
            train_copy(model, optimizer, loader, budget, [stream])
    except Exception as exc:  # the fork fails, the parent run goes on
        message = _failure(exc, model, loader)
        log.warning("the fork %r failed: %s", stream.name, message)
        stream.flush()
        return ForkOutcome("failed", stream.steps, time.perf_counter() - started, message)
    status: ForkState = "cancelled" if stream.cancelled_at is not None else "done"
    return ForkOutcome(status, stream.steps, time.perf_counter() - started)


def _failure(exc: Exception, model: nn.Module, loader: DataLoader) -> str:
    """What a fork's exception says, and why when batch normalisation met one-sample batches
    (torch's own words name neither the slice nor the batch size)."""
    message = f"{type(exc).__name__}: {exc}"
    norms = any(isinstance(m, _BatchNorm) for m in model.modules())
    if not isinstance(exc, ValueError) or not norms:
        return message
    if len(loader.dataset) == 1:  # type: ignore[arg-type]
        why = "the slice has 1 sample"
        expected = "a slice of at least 2 samples"
    elif batch_size_of(loader) == 1:
        why = "the fork trains in batches of 1 sample"
        expected = "a batch_size of at least 2"
    else:
        return message
    return (
        f"{message} ({why}; a model with batch normalisation needs at least 2 samples per "
        f"training batch; expected {expected})"
    )
