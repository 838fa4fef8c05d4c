"""Read the metrics a user logs, without forcing a host sync.

Lightning's ``trainer.callback_metrics`` converts progress-bar metrics to Python numbers
(one ``.item()`` each) every time it is read, so the per-step path reads the step values
Lightning caches on its results collection instead, as device tensors. The native trainer
keeps the values a step returns in ``callback_metrics`` as they are.
"""

from __future__ import annotations

import numbers
import re
from typing import Any

import torch

from onthefly.callbacks._driver import is_lightning

Scalar = torch.Tensor | float
"""A one-element tensor (still on its device) or a Python number."""


def scalar_or_none(value: Any) -> Scalar | None:
    """``value`` if it is a number or a one-element tensor, else ``None`` (never syncs)."""
    if type(value) is float:  # a learning rate, at every step: skip the ABC checks below
        return value
    if isinstance(value, torch.Tensor):
        return value.detach() if value.numel() == 1 else None
    if isinstance(value, numbers.Real):
        return float(value)
    return None


def host_floats(values: dict[str, Scalar]) -> dict[str, float]:
    """``values`` as Python floats: one stacked copy per device (for per-evaluation use only)."""
    out = {name: value for name, value in values.items() if isinstance(value, float)}
    by_device: dict[torch.device, list[tuple[str, torch.Tensor]]] = {}
    for name, value in values.items():
        if isinstance(value, torch.Tensor):
            by_device.setdefault(value.device, []).append((name, value))
    for pairs in by_device.values():
        stacked = torch.stack([value.reshape(()).to(torch.float32) for _, value in pairs])
        out.update(zip((name for name, _ in pairs), stacked.tolist(), strict=True))
    return out


def scalars(items: Any) -> dict[str, Scalar]:
    """The ``(name, value)`` pairs whose value is a number or a one-element tensor."""
    out: dict[str, Scalar] = {}
    for name, value in items:
        scalar = scalar_or_none(value)
        if scalar is not None:
            out[str(name)] = scalar
    return out


def step_values(trainer: Any, outputs: Any) -> dict[str, Scalar]:
    """The values logged during the training step that just ended, as device tensors.

    Args:
        trainer: the trainer.
        outputs: what the step returned (the native trainer's values live there).
    """
    results = _lightning_results(trainer)
    if results is not None:
        return scalars(
            (metric.meta.name, metric._forward_cache)
            for _, metric in results.valid_items()
            if metric.meta.on_step
        )
    if not isinstance(outputs, dict) or (len(outputs) == 1 and "loss" in outputs):
        return {}  # the usual native step: nothing logged besides the loss
    return scalars((k, v) for k, v in outputs.items() if k != "loss")


def epoch_values(trainer: Any, before: dict[str, int], skip: set[str]) -> dict[str, Scalar]:
    """The epoch-level training values (``on_epoch`` logs, metrics computed per epoch).

    Read in ``on_train_epoch_end``; may sync once (Lightning computes epoch aggregates).

    Args:
        trainer: the trainer.
        before: :func:`snapshot` taken when the epoch started (native trainer).
        skip: names already reported per step (native trainer).
    """
    results = _lightning_results(trainer)
    if results is not None:
        names = {
            metric.meta.forked_name(False)
            for _, metric in results.valid_items()
            if metric.meta.on_epoch
        }
        return scalars((k, v) for k, v in trainer.callback_metrics.items() if k in names)
    # Native: what changed during the epoch, minus the step values and evaluation results.
    return {
        name: value
        for name, value in _changed(trainer, before).items()
        if name not in skip and not name.startswith(_EVAL_PREFIXES)
    }


def eval_values(trainer: Any, before: dict[str, int]) -> dict[str, Scalar]:
    """The values a validation or test run logged, read at its end (``on_*_end``).

    Args:
        trainer: the trainer.
        before: :func:`snapshot` taken when the evaluation started (native trainer).
    """
    results = _lightning_results(trainer)
    if results is not None:
        # Every loader's values: valid_items() keeps only the loader in progress, and none is
        # by now. With several loaders Lightning names them ``val_loss/dataloader_idx_0``, ...
        names = {metric.meta.name for metric in results.values()}
        metrics = trainer.callback_metrics
        return scalars(
            (name, value)
            for name, value in metrics.items()
            if name in names or _LOADER_SUFFIX.sub("", name) in names
        )
    return _changed(trainer, before)


def snapshot(trainer: Any) -> dict[str, int]:
    """Identity of each callback metric, to tell later which ones were replaced (native)."""
    if is_lightning(trainer):
        return {}
    return {name: id(value) for name, value in trainer.callback_metrics.items()}


def _changed(trainer: Any, before: dict[str, int]) -> dict[str, Scalar]:
    return scalars(
        (name, value)
        for name, value in trainer.callback_metrics.items()
        if before.get(name) != id(value)
    )


_EVAL_PREFIXES = ("val_", "test_")
_LOADER_SUFFIX = re.compile(r"/dataloader_idx_\d+$")


def _lightning_results(trainer: Any) -> Any:
    # Lightning's results collection of the active loop; absent under the native trainer.
    if not is_lightning(trainer):
        return None
    results = getattr(trainer, "_results", None)
    return results if hasattr(results, "valid_items") else None
