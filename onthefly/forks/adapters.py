"""Low-rank adapters (LoRA, Hu et al. 2021) on Linear layers, and folding them back.

A fork made with adapters trains only a low-rank update ``scale * B @ A`` of each Linear
weight, the rest of the model frozen; merging adds the updates of one or more forks to the
parent's weights (task arithmetic, Ilharco et al. 2023): ``W + sum_i w_i * B_i @ A_i``.

* :class:`LoRALinear` — a frozen ``nn.Linear`` plus its adapter;
* :func:`add_adapters` / :func:`strip_adapters` — put adapters on every Linear of a model
  (freezing everything else) and take them off again;
* :func:`adapter_deltas` — a trained adapter model's weight updates, named like the plain
  model's weights;
* :func:`fold_adapters` — a copy of a plain model with updates added.

While adapters are on, BatchNorm running statistics are frozen too (momentum 0, restored by
:func:`strip_adapters`): the adapted model's function is then exactly the base model's with
``W + scale * B @ A`` in each Linear, so folding one fork's deltas with weight 1 into the
model it was forked from reproduces that fork.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn import functional as F

from onthefly.errors import ConfigurationError

_RECORD = "_onthefly_adapters"
"""Attribute of a model with adapters: what :func:`strip_adapters` puts back."""


class LoRALinear(nn.Module):
    """A frozen ``nn.Linear`` plus a trainable low-rank update of its weight.

    ``forward(x) = base(x) + scale * (x @ A.T @ B.T)`` with ``A`` of shape ``(rank,
    in_features)`` (Kaiming-uniform, as ``nn.Linear`` initialises its weight) and ``B`` of
    shape ``(out_features, rank)`` (zeros, so a new adapter changes nothing), ``scale = alpha
    / rank``. ``A`` and ``B`` take the base weight's dtype and device.

    Args:
        base: the layer to adapt (its parameters are frozen: ``requires_grad=False``).
        rank: the rank of the update, a positive integer.
        alpha: the scale numerator; ``None`` for ``rank`` (scale 1).

    Raises:
        ConfigurationError: ``base`` not an ``nn.Linear`` or ``rank`` not a positive integer.

    Example:
        >>> layer = LoRALinear(nn.Linear(16, 8), rank=4)
        >>> layer(torch.zeros(2, 16)).shape
        torch.Size([2, 8])
    """

    def __init__(self, base: nn.Linear, rank: int, alpha: float | None = None) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ConfigurationError(f"LoRALinear wraps an nn.Linear, got a {type(base).__name__}")
        _check_rank(rank)
        self.base = base
        self.rank = rank
        self.alpha = float(rank if alpha is None else alpha)
        self.scale = self.alpha / rank
        for param in base.parameters():
            param.requires_grad_(False)
        weight = base.weight
        self.A = nn.Parameter(
            torch.empty(rank, base.in_features, dtype=weight.dtype, device=weight.device)
        )
        self.B = nn.Parameter(
            torch.zeros(base.out_features, rank, dtype=weight.dtype, device=weight.device)
        )
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * F.linear(F.linear(x, self.A), self.B)

    def delta(self) -> torch.Tensor:
        """The update of the base weight, ``scale * B @ A`` (detached)."""
        with torch.no_grad():
            return self.scale * (self.B @ self.A)

    def extra_repr(self) -> str:
        return f"rank={self.rank}, alpha={self.alpha:g}"


@dataclass
class _Record:
    """What :func:`add_adapters` changed besides the Linear layers."""

    requires_grad: dict[str, bool] = field(default_factory=dict)
    momenta: dict[str, float | None] = field(default_factory=dict)


def add_adapters(model: nn.Module, rank: int, alpha: float | None = None) -> list[nn.Parameter]:
    """Put a :class:`LoRALinear` on every ``nn.Linear`` of ``model`` (in place); freeze the rest.

    Every ``nn.Linear``, however deep, is replaced by a :class:`LoRALinear` around it; a layer
    narrower than ``rank`` (``min(in_features, out_features) < rank``) gets an adapter of rank
    ``min(in_features, out_features)`` (already a full-rank update of that layer). The scale
    is ``alpha / rank`` in every layer. All other parameters are frozen
    (``requires_grad=False``) and BatchNorm running statistics stop updating (momentum 0);
    :func:`strip_adapters` puts both back.

    Args:
        model: the model to adapt (not an ``nn.Linear`` itself: wrap it in a container).
        rank: the adapters' rank, a positive integer no larger than ``min(in_features,
            out_features)`` of at least one Linear layer.
        alpha: the scale numerator; ``None`` for ``rank`` (scale 1).

    Returns:
        The adapter parameters (``A`` and ``B`` of each layer), the only trainable ones: what
        the optimizer of the adapted model should train.

    Raises:
        ConfigurationError: ``rank`` not a positive integer or larger than every Linear
            layer, a model without Linear layers, a model that is an ``nn.Linear``, or a
            model that already has adapters.

    Example:
        >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
        >>> params = add_adapters(model, rank=4)
        >>> optimizer = torch.optim.Adam(params, lr=1e-3)
    """
    _check_rank(rank)
    if isinstance(model, nn.Linear | LoRALinear):
        raise ConfigurationError(
            "add_adapters adapts the Linear layers inside a model, got an nn.Linear itself; "
            "wrap it in a container (e.g. nn.Sequential(layer))"
        )
    if any(isinstance(m, LoRALinear) for m in model.modules()):
        raise ConfigurationError(
            "the model already has adapters; call strip_adapters(model) before adding new ones"
        )
    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ConfigurationError(
            "add_adapters: the model has no nn.Linear layer; adapters go on Linear layers"
        )
    widest = max(min(m.in_features, m.out_features) for _, m in linears)
    if rank > widest:
        raise ConfigurationError(
            f"adapter rank {rank} exceeds min(in_features, out_features) of every Linear layer "
            f"(largest: {widest}); expected a rank <= {widest}"
        )
    record = _Record(
        requires_grad={name: p.requires_grad for name, p in model.named_parameters()},
        momenta={name: norm.momentum for name, norm in _batch_norms(model)},
    )
    scale = (rank if alpha is None else float(alpha)) / rank
    for param in model.parameters():
        param.requires_grad_(False)
    for _, norm in _batch_norms(model):
        # Momentum 0: in train mode the running statistics stay exactly as they are.
        norm.momentum = 0.0
    adapters: list[nn.Parameter] = []
    for name, linear in linears:
        layer_rank = min(rank, linear.in_features, linear.out_features)
        wrapped = LoRALinear(linear, layer_rank, alpha=scale * layer_rank)
        _replace(model, name, wrapped)
        adapters += [wrapped.A, wrapped.B]
    setattr(model, _RECORD, record)
    return adapters


def adapter_deltas(model: nn.Module) -> dict[str, torch.Tensor]:
    """The weight updates ``scale * B @ A`` of a model with adapters.

    Returns:
        ``{name of the adapted Linear's weight in the plain model: update}``, e.g.
        ``{"2.weight": ...}`` for a ``LoRALinear`` at ``model[2]`` — the keys of the plain
        model's ``state_dict``. Detached tensors of the weight's shape, dtype and device.

    Raises:
        ConfigurationError: a model without adapters.

    Example:
        >>> deltas = adapter_deltas(fork)  # doctest: +SKIP
    """
    deltas = {
        f"{name}.weight": module.delta()
        for name, module in model.named_modules()
        if isinstance(module, LoRALinear)
    }
    if not deltas:
        raise ConfigurationError(
            "adapter_deltas: the model has no adapters; expected a model made with add_adapters"
        )
    return deltas


def strip_adapters(model: nn.Module) -> nn.Module:
    """Put the plain ``nn.Linear`` layers back (in place), their base weights unchanged.

    The adapters are dropped (take :func:`adapter_deltas` first to keep them); the
    ``requires_grad`` flags and BatchNorm momenta that :func:`add_adapters` changed are put
    back. A model without adapters is returned as it is.

    Returns:
        ``model``.

    Example:
        >>> deltas = adapter_deltas(fork)  # doctest: +SKIP
        >>> plain = strip_adapters(fork)  # doctest: +SKIP
    """
    for name, module in list(model.named_modules()):
        if isinstance(module, LoRALinear):
            _replace(model, name, module.base)
    record = getattr(model, _RECORD, None)
    if isinstance(record, _Record):
        params = dict(model.named_parameters())
        for name, flag in record.requires_grad.items():
            if name in params:
                params[name].requires_grad_(flag)
        for name, norm in _batch_norms(model):
            norm.momentum = record.momenta.get(name, norm.momentum)
        delattr(model, _RECORD)
    return model


def fold_adapters(
    base: nn.Module,
    deltas: Sequence[Mapping[str, torch.Tensor]],
    weights: Sequence[float] | None = None,
) -> nn.Module:
    """A deep copy of ``base`` with ``W + sum_i w_i * delta_i`` in each adapted weight.

    The default weights are 1 (task arithmetic's plain sum): one fork folded into the model
    it was forked from reproduces that fork exactly, and forks trained on different slices
    each keep their full update. Pass ``weights=[1 / n] * n`` for the average of the forks'
    updates (the uniform soup of the adapted forks), or smaller weights when the updates
    interfere.

    Args:
        base: a plain model (no adapters): the parent.
        deltas: one mapping per fork, as :func:`adapter_deltas` returns.
        weights: one finite non-negative weight per mapping (not normalised); ``None`` for 1.

    Returns:
        A new model; gradients cleared, everything but the adapted weights copied from
        ``base``.

    Raises:
        ConfigurationError: no deltas, weights of the wrong length or negative, a delta for a
            name that is not a parameter of ``base`` (e.g. a base that still has adapters) or
            whose shape differs.

    Example:
        >>> merged = fold_adapters(parent, [adapter_deltas(a), adapter_deltas(b)])  # doctest: +SKIP
    """
    if isinstance(deltas, Mapping) or len(deltas) == 0:
        raise ConfigurationError(
            "fold_adapters: expected a non-empty sequence of delta mappings (one per fork)"
        )
    values = [1.0] * len(deltas) if weights is None else _fold_weights(weights, len(deltas))
    merged = copy.deepcopy(base)
    params = dict(merged.named_parameters())
    with torch.no_grad():
        for i, (delta, weight) in enumerate(zip(deltas, values, strict=True)):
            for name, update in delta.items():
                param = params.get(name)
                if param is None:
                    raise ConfigurationError(
                        f"deltas[{i}] has {name!r}, which is not a parameter of the base model; "
                        "expected a plain model (strip_adapters first) of the forks' architecture"
                    )
                if update.shape != param.shape:
                    raise ConfigurationError(
                        f"deltas[{i}][{name!r}] has shape {list(update.shape)}; expected the "
                        f"weight's shape {list(param.shape)}"
                    )
                if weight:
                    param.add_(update.to(device=param.device, dtype=param.dtype), alpha=weight)
    for param in merged.parameters():
        param.grad = None
    return merged


def _fold_weights(weights: Sequence[float], count: int) -> list[float]:
    values = [float(w) for w in weights]
    if len(values) != count:
        raise ConfigurationError(f"weights: got {len(values)} weights for {count} deltas")
    if any(not (w >= 0 and math.isfinite(w)) for w in values):
        raise ConfigurationError(f"weights: expected finite non-negative numbers, got {values}")
    return values


def _batch_norms(model: nn.Module) -> list[tuple[str, nn.modules.batchnorm._BatchNorm]]:
    return [
        (name, m)
        for name, m in model.named_modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
    ]


def _replace(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, attribute = name.rpartition(".")
    setattr(model.get_submodule(parent), attribute, module)


def _check_rank(rank: int) -> None:
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ConfigurationError(f"adapter rank must be a positive integer, got {rank!r}")
