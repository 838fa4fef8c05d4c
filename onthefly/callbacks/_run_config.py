"""A run's configuration as training starts, for the dashboard's runs table.

Read from what both trainers expose (the optimizers, the scheduler, the training loader, the
limits) and from the module's own hyperparameters (Lightning's ``save_hyperparameters``).
Only scalars and short strings: the table compares runs by these values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onthefly.callbacks._hparams import schedulers_of
from onthefly.drivers.base import TrainerHost
from onthefly.protocol import ConfigValue
from onthefly.sessions.data_position import TrackedLoader

MAX_TEXT = 80
"""Longest string value kept (longer ones are cut)."""

MAX_HPARAMS = 50
"""The module's own hyperparameters kept (the first ones)."""

_GROUP_KEYS = ("lr", "weight_decay", "momentum", "betas", "eps")


def describe_run(trainer: TrainerHost, module: Any) -> dict[str, ConfigValue]:
    """The optimizer and its first param group, scheduler, batch size, limits, precision,
    model size and the module's hyperparameters (``hparams.<name>``).

    Example:
        >>> describe_run(trainer, model)  # doctest: +SKIP
        {'optimizer': 'AdamW', 'lr': 0.002, ..., 'batch_size': 64, 'max_epochs': 60, ...}
    """
    values: dict[str, ConfigValue] = {}
    optimizers = list(getattr(trainer, "optimizers", ()) or ())
    if optimizers:
        optimizer = optimizers[0]
        values["optimizer"] = type(optimizer).__name__
        groups = getattr(optimizer, "param_groups", [])
        if groups:
            for key in _GROUP_KEYS:
                if key in groups[0]:
                    values[key] = scalar(groups[0][key])
        if len(groups) > 1:
            values["param_groups"] = len(groups)
    schedulers = schedulers_of(trainer)
    if schedulers:
        values["scheduler"] = type(schedulers[0]).__name__
    batch_size = getattr(_train_loader(trainer), "batch_size", None)
    if isinstance(batch_size, int):
        values["batch_size"] = batch_size
    accumulate = getattr(trainer, "accumulate_grad_batches", None)
    if isinstance(accumulate, int) and accumulate > 1:
        values["accumulate_grad_batches"] = accumulate
    values["max_epochs"] = _limit(getattr(trainer, "max_epochs", None))
    values["max_steps"] = _limit(getattr(trainer, "max_steps", None))
    precision = getattr(trainer, "precision", None)
    if precision is not None:
        values["precision"] = scalar(precision)
    if int(getattr(trainer, "world_size", 1) or 1) > 1:
        values["world_size"] = int(trainer.world_size)
    if module is not None:
        values["model"] = type(module).__name__
        parameters = list(module.parameters()) if hasattr(module, "parameters") else []
        values["parameters"] = sum(p.numel() for p in parameters)  # metadata: no device access
        values["trainable"] = sum(p.numel() for p in parameters if p.requires_grad)
        values.update(_module_hparams(getattr(module, "hparams", None)))
    return values


def scalar(value: Any) -> ConfigValue:
    """A value as one table cell: numbers and flags as they are, the rest as short text."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, int | float) for v in value):
        text = ", ".join(f"{v:g}" for v in value)
    else:
        text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _limit(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def _train_loader(trainer: TrainerHost) -> Any:
    for name in ("train_loader", "train_dataloader"):
        try:
            loader = getattr(trainer, name, None)
        except Exception:  # Lightning raises while the loaders are not set up
            continue
        if loader is not None and not callable(loader):
            return TrackedLoader.unwrap(loader)
    return None


def _module_hparams(hparams: Any) -> dict[str, ConfigValue]:
    if not isinstance(hparams, Mapping):
        return {}
    out: dict[str, ConfigValue] = {}
    for name, value in hparams.items():
        if len(out) >= MAX_HPARAMS:
            break
        if isinstance(value, Mapping):
            for inner, item in value.items():
                if len(out) < MAX_HPARAMS:
                    out[f"hparams.{name}.{inner}"] = scalar(item)
        else:
            out[f"hparams.{name}"] = scalar(value)
    return out
