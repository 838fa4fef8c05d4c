"""Logged values as scalars that stay on their device until they are shipped.

A host sync per step would stall the GPU, so values are kept as one-element tensors (or
Python numbers) and leave the device together (:func:`host_floats`). How each trainer keeps
what the user logs is its driver's business (:meth:`onthefly.drivers.base.Driver.step_values`).
"""

from __future__ import annotations

import numbers
from typing import Any

import torch

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
