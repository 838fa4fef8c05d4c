"""What the merge methods share: architecture checks, merged copies, devices, kept modes."""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from lightning.fabric.utilities.apply_func import move_data_to_device
from torch import nn

from onthefly.errors import ConfigurationError

WeightedCombine = Callable[[str, Sequence[torch.Tensor], list[float]], torch.Tensor]
"""``combine(name, tensors, weights) -> merged``: one merged floating-point tensor from every
model's tensor of that name (they have the same shape and dtype; they may sit on other
devices), with one weight per model."""


def named_tensors(model: nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """Parameters then buffers, by qualified name (a tensor shared by two modules once)."""
    yield from model.named_parameters()
    yield from ((name, b) for name, b in model.named_buffers() if b is not None)


def check_models(models: Sequence[nn.Module], what: str = "models") -> None:
    """Raise unless ``models`` is a non-empty sequence of modules of one architecture.

    One architecture: the same parameter and buffer names, with the same shapes and dtypes
    (devices may differ).

    Raises:
        ConfigurationError: naming the first model and tensor that do not match.
    """
    if isinstance(models, nn.Module) or len(models) == 0:
        raise ConfigurationError(f"{what}: expected a non-empty sequence of models, got none")
    for i, model in enumerate(models):
        if not isinstance(model, nn.Module):
            raise ConfigurationError(
                f"{what}[{i}] is a {type(model).__name__}; expected a torch.nn.Module"
            )
    reference = _signature(models[0])
    for i, model in enumerate(models[1:], start=1):
        signature = _signature(model)
        for name, expected in reference.items():
            got = signature.get(name)
            if got is None:
                raise ConfigurationError(
                    f"{what}[{i}] has no tensor {name!r} that {what}[0] has; the models must "
                    "share one architecture"
                )
            if got != expected:
                raise ConfigurationError(
                    f"{what}[{i}]: tensor {name!r} is {_show(got)}, expected {_show(expected)} "
                    f"as in {what}[0]; the models must share one architecture"
                )
        extra = next((name for name in signature if name not in reference), None)
        if extra is not None:
            raise ConfigurationError(
                f"{what}[{i}] has a tensor {extra!r} that {what}[0] lacks; the models must share "
                "one architecture"
            )


def _signature(model: nn.Module) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    return {name: (tuple(t.shape), t.dtype) for name, t in named_tensors(model)}


def _show(signature: tuple[tuple[int, ...], torch.dtype]) -> str:
    shape, dtype = signature
    return f"{list(shape)} {str(dtype).removeprefix('torch.')}"


def check_weights(weights: Sequence[float], count: int, what: str = "weights") -> list[float]:
    """The weights as floats, checked: one per model, finite, non-negative, a positive sum.

    Raises:
        ConfigurationError: for any other weights.
    """
    values = [float(w) for w in weights]
    if len(values) != count:
        raise ConfigurationError(f"{what}: got {len(values)} weights for {count} models")
    if any(not (w >= 0 and math.isfinite(w)) for w in values) or sum(values) <= 0:
        raise ConfigurationError(
            f"{what}: expected finite non-negative numbers with a positive sum, got {values}"
        )
    return values


def weighted_mean(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """``sum_i w_i * t_i / sum_i w_i`` in at least float32, on the first tensor's device."""
    first = tensors[0]
    acc = torch.zeros(first.shape, dtype=accumulator_dtype(first.dtype), device=first.device)
    for weight, tensor in zip(weights, tensors, strict=True):
        if weight:
            acc.add_(tensor.to(device=acc.device, dtype=acc.dtype), alpha=weight)
    return acc.div_(math.fsum(weights))


def weighted_copy(
    models: Sequence[nn.Module], weights: Sequence[float] | None, combine: WeightedCombine
) -> nn.Module:
    """A deep copy of ``models[0]`` whose floating-point tensors are merged by ``combine``.

    Parameters and buffers of a floating-point (or complex) dtype get ``combine(name,
    [each model's tensor], weights)``, the weights checked (``None``: equal); other tensors
    (``num_batches_tracked``) stay those of ``models[0]``. The copy's gradients are cleared:
    they belonged to ``models[0]``.

    Raises:
        ConfigurationError: weights of the wrong length, negative or summing to zero.
    """
    values = check_weights(weights, len(models)) if weights is not None else [1.0] * len(models)
    result = copy.deepcopy(models[0])
    sources = [dict(named_tensors(model)) for model in models]
    with torch.no_grad():
        for name, target in named_tensors(result):
            if target.is_floating_point() or target.is_complex():
                target.copy_(combine(name, [source[name] for source in sources], values))
    for param in result.parameters():
        param.grad = None
    return result


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """At least float32: sums of half-precision tensors lose too much on the way."""
    return torch.promote_types(dtype, torch.float32)


def device_of(model: nn.Module) -> torch.device:
    """The device of the model's first parameter or buffer (CPU for a model with neither)."""
    first = next((t for _, t in named_tensors(model)), None)
    return first.device if first is not None else torch.device("cpu")


def to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` with every tensor in it on ``device`` (a no-op for tensors already there)."""
    return move_data_to_device(batch, device)


def batches_on(model: nn.Module, batches: Iterable[Any]) -> Iterator[Any]:
    """Each of ``batches`` moved to ``model``'s device (:func:`to_device`), as it is drawn."""
    device = device_of(model)
    for batch in batches:
        yield to_device(batch, device)


@contextlib.contextmanager
def kept_modes(*models: nn.Module) -> Iterator[None]:
    """Every module's own train/eval mode put back on exit (also on errors)."""
    modes = [(module, module.training) for model in models for module in model.modules()]
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training
