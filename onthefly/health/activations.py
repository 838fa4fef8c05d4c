"""Activations: dead and saturated units per layer, from one forward pass on the current batch.

Temporary forward hooks on the activation modules (removed after the check) reduce each
output on the device to per-unit fractions; one copy brings them to the host. A unit is a
channel (dim 1) of a 4-D or 5-D output, else a feature of the last dimension.

* rectifiers (``ReLU``, ``ReLU6``, ``GELU``, ``SiLU``, ``ELU``, ``CELU``, ``SELU``,
  ``Mish``, ``Hardswish``): a unit is **dead** when its output is ``<= 0`` for every sample
  of the batch (no gradient flows through it);
* squashing functions (``Sigmoid``, ``Tanh``, ``Hardtanh``, ``Hardsigmoid``, ``Softsign``):
  a unit is **saturated** when at least :data:`SATURATED_SHARE` of its outputs lie within
  :data:`SATURATION_MARGIN` of the bounds (vanishing local gradient).

A layer with at least :data:`WARN_FRACTION` of its units dead or saturated is a ``warning``.
Activations computed with functions (``F.relu``) instead of modules are not seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from onthefly.health.findings import Finding, finding, rounded
from onthefly.health.preserve import preserved
from onthefly.health.probe import Probe

WARN_FRACTION = 0.5
SATURATED_SHARE = 0.99
SATURATION_MARGIN = 0.01

_RECTIFIERS = (
    nn.ReLU,
    nn.ReLU6,
    nn.GELU,
    nn.SiLU,
    nn.ELU,
    nn.CELU,
    nn.SELU,
    nn.Mish,
    nn.Hardswish,
)
# Output bounds of the squashing functions.
_SQUASHERS: dict[type[nn.Module], tuple[float, float]] = {
    nn.Sigmoid: (0.0, 1.0),
    nn.Hardsigmoid: (0.0, 1.0),
    nn.Tanh: (-1.0, 1.0),
    nn.Softsign: (-1.0, 1.0),
}


def check_activations(probe: Probe) -> list[Finding]:
    """Measure dead and saturated units; see the module docstring.

    Args:
        probe: the run at a batch boundary.
    """
    stats: dict[str, tuple[str, torch.Tensor]] = {}
    handles = []
    for name, module in probe.model.named_modules():
        measure = _measure_for(module)
        if measure is not None:
            handles.append(module.register_forward_hook(_hook(name, measure, stats)))
    try:
        with preserved(probe.model, probe.optimizers):
            probe.loss()
    finally:
        for handle in handles:
            handle.remove()
    if not stats:
        return [
            finding(
                "activations",
                "info",
                "no activation modules (ReLU, GELU, Tanh, Sigmoid, ...) found to measure",
            )
        ]
    names = list(stats)
    fractions = torch.stack([stats[n][1].to(torch.float32).cpu() for n in names]).tolist()
    return _findings([(n, stats[n][0], f) for n, f in zip(names, fractions, strict=True)])


Measure = Callable[[torch.Tensor], torch.Tensor]


def _measure_for(module: nn.Module) -> tuple[str, Measure] | None:
    if isinstance(module, _RECTIFIERS):
        return "dead", lambda out: (_per_unit(out) <= 0).all(dim=0).float().mean()
    if isinstance(module, nn.Hardtanh):  # ReLU6 is a Hardtanh too, caught above
        low, high = float(module.min_val), float(module.max_val)
        return "saturated", _saturation(low, high)
    for kind, (low, high) in _SQUASHERS.items():
        if isinstance(module, kind):
            return "saturated", _saturation(low, high)
    return None


def _saturation(low: float, high: float) -> Measure:
    margin = SATURATION_MARGIN * (high - low)

    def measure(out: torch.Tensor) -> torch.Tensor:
        units = _per_unit(out)
        near = (units <= low + margin) | (units >= high - margin)
        return (near.float().mean(dim=0) >= SATURATED_SHARE).float().mean()

    return measure


def _per_unit(out: torch.Tensor) -> torch.Tensor:
    """``out`` as ``[observations, units]``: channels of conv maps, else the last dimension."""
    if out.dim() in (4, 5):
        return out.transpose(0, 1).reshape(out.shape[1], -1).t()
    if out.dim() == 1:
        return out.reshape(-1, 1)
    return out.reshape(-1, out.shape[-1])


def _hook(
    name: str, measure: tuple[str, Measure], stats: dict[str, tuple[str, torch.Tensor]]
) -> Any:
    kind, fn = measure

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.numel() and name not in stats:
            stats[name] = (kind, fn(output.detach().float()))

    return hook


def _findings(layers: list[tuple[str, str, float]]) -> list[Finding]:
    out: list[Finding] = []
    for name, kind, fraction in layers:
        if fraction >= WARN_FRACTION:
            out.append(
                finding(
                    "activations",
                    "warning",
                    f"{fraction:.0%} of the units of {name} are {kind} on this batch"
                    + (" (no gradient flows through them)" if kind == "dead" else ""),
                    layer=name,
                    kind=kind,
                    fraction=rounded(fraction),
                )
            )
    table = [{"layer": n, "kind": k, "fraction": rounded(f)} for n, k, f in layers]
    worst = max(layers, key=lambda item: item[2])
    out.append(
        finding(
            "activations",
            "info",
            f"{len(layers)} activation layer(s) measured; most affected: {worst[0]} "
            f"({worst[2]:.0%} {worst[1]})",
            layers=table,
        )
    )
    return out
