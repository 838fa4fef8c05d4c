"""Checking the Trainer's and ``fit``'s arguments; every error says what was expected."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch import nn
from torch.optim.lr_scheduler import ReduceLROnPlateau

from onthefly.errors import ConfigurationError
from onthefly.native.options import LOOP_OPTIONS

SCHEDULER_INTERVALS = ("epoch", "step")


def session_enabled(session: bool | None) -> bool:
    """``session`` if given, else on unless the environment sets ``ONTHEFLY_SESSION=0``."""
    if session is not None:
        return session
    value = os.environ.get("ONTHEFLY_SESSION", "1").strip().lower()
    return value not in ("0", "false", "off", "no")


def rank_and_world_size() -> tuple[int, int]:
    """``(global_rank, world_size)`` of an initialised process group, else ``(0, 1)``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def check_options(options: Mapping[str, Any]) -> None:
    """Raise ``ConfigurationError`` for a keyword that is none of the loop's."""
    unknown = sorted(set(options) - LOOP_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown Trainer arguments {unknown}; expected some of {sorted(LOOP_OPTIONS)}"
        )


def check_validation_interval(value: int | None) -> int:
    """``val_every_n_epochs`` as an int >= 0 (``None``: 0, never)."""
    if value is None:
        return 0
    if not isinstance(value, int) or value < 0:
        raise ConfigurationError(f"val_every_n_epochs={value!r}; expected an int >= 0 (0: never)")
    return value


def check_clip_norm(value: float | None) -> float | None:
    """``grad_clip_norm``: ``None`` (no clipping) or a number > 0."""
    if value is not None and not value > 0:
        raise ConfigurationError(f"grad_clip_norm={value!r}; expected > 0 or None")
    return value


def check_limits(max_epochs: int | None, max_steps: int | None) -> tuple[int | None, int]:
    """Normalise the limits to ``(max_epochs or None, max_steps or -1)``; one is required."""
    if max_epochs == -1:
        max_epochs = None
    if max_steps is None:
        max_steps = -1
    if max_epochs is None and max_steps == -1:
        raise ConfigurationError(
            "the run has no end: set max_epochs (e.g. max_epochs=10) or max_steps "
            "(a callback or the dashboard can extend it later)"
        )
    if max_epochs is not None and (not isinstance(max_epochs, int) or max_epochs < 1):
        raise ConfigurationError(f"max_epochs={max_epochs!r}; expected a positive int or None")
    if not isinstance(max_steps, int) or (max_steps < 1 and max_steps != -1):
        raise ConfigurationError(f"max_steps={max_steps!r}; expected a positive int or None")
    return max_epochs, max_steps


def check_fit_args(
    model: Any,
    optimizer: Any,
    loss_fn: Any,
    train_loader: Any,
    val_loader: Any,
    scheduler: Any,
    scheduler_interval: str,
    val_every_n_epochs: int,
    custom_training_step: bool,
) -> None:
    """Raise ``ConfigurationError`` for a missing or invalid ``fit`` argument."""
    if not isinstance(model, nn.Module):
        raise ConfigurationError(f"fit(model={model!r}); expected a torch.nn.Module")
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigurationError(
            f"fit(optimizer={optimizer!r}); expected a torch.optim.Optimizer, e.g. "
            "torch.optim.Adam(model.parameters())"
        )
    if loss_fn is not None and not callable(loss_fn):
        raise ConfigurationError(f"fit(loss_fn={loss_fn!r}); expected a callable")
    if loss_fn is None and not custom_training_step:
        raise ConfigurationError(
            "fit() needs loss_fn= for the default step (e.g. nn.CrossEntropyLoss()), or "
            "register your own step with @trainer.training_step"
        )
    if not isinstance(train_loader, Iterable):
        raise ConfigurationError(
            f"fit(train_loader={train_loader!r}); expected an iterable of batches, "
            "e.g. a DataLoader"
        )
    if val_every_n_epochs and val_loader is None:
        raise ConfigurationError(
            f"val_every_n_epochs={val_every_n_epochs} needs fit(val_loader=...); "
            "or set val_every_n_epochs=0"
        )
    if scheduler_interval not in SCHEDULER_INTERVALS:
        raise ConfigurationError(
            f"scheduler_interval={scheduler_interval!r}; expected 'epoch' or 'step'"
        )
    if isinstance(scheduler, ReduceLROnPlateau) and (
        not val_every_n_epochs or scheduler_interval != "epoch"
    ):
        raise ConfigurationError(
            "ReduceLROnPlateau is stepped with val_loss after each validation: set "
            "val_every_n_epochs > 0, pass val_loader= and keep scheduler_interval='epoch'"
        )
