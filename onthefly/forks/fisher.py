"""Fisher-weighted averaging (Matena & Raffel 2022): each weight trusted as much as it matters.

* :func:`diagonal_fisher` — the empirical diagonal Fisher of a model on some data: for each
  trainable parameter, the mean over samples of the squared gradient of that sample's loss
  (its negative log-likelihood);
* :func:`fisher_merge` — ``theta = sum_i F_i * theta_i / sum_i F_i``, elementwise.

A specialist trained on a hard slice has a large Fisher on the weights that slice needs, the
parent on the weights the rest of the data needs: the merge takes each weight mostly from the
model whose data depends on it.

Per-sample gradients: :func:`torch.func.vmap` over :func:`torch.func.grad` of a
:func:`torch.func.functional_call` — one vectorised backward pass per chunk of samples. When
the model or loss cannot be vmapped (data-dependent control flow, ``.item()``, in-place
updates of captured tensors, ...), a loop takes over: one forward pass per batch, then one
backward pass per sample (``torch.autograd.grad`` of that sample's loss). Both give the same
values; the loop is slower. ``method`` chooses; the default tries ``vmap`` first.

The model is evaluated in **eval mode** (modes restored after): BatchNorm then uses its
running statistics and dropout is off, so a sample's loss depends on that sample alone and
its gradient is really its own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import nn
from torch.func import functional_call, grad, vmap
from torch.utils import _pytree as pytree

from onthefly.errors import ConfigurationError
from onthefly.forks._models import (
    accumulator_dtype,
    batches_on,
    check_models,
    kept_modes,
    weighted_copy,
    weighted_mean,
)

log = logging.getLogger(__name__)

LossOf = Callable[[nn.Module, Any], torch.Tensor]
"""``loss_of(model, batch) -> Tensor[B]``: each sample's loss (the negative log-likelihood for
classification, e.g. ``cross_entropy(..., reduction="none")``), differentiable."""

Method = Literal["auto", "vmap", "loop"]

PER_SAMPLE_BUDGET = 2**26
"""Per-sample gradient values held at once on the ``vmap`` path (256 MiB of float32): the
number of samples vmapped together is this divided by the number of trainable weights."""


def diagonal_fisher(
    model: nn.Module,
    batches: Iterable[Any],
    loss_of: LossOf,
    max_samples: int | None = None,
    method: Method = "auto",
) -> dict[str, torch.Tensor]:
    """The empirical diagonal Fisher of ``model``: the mean over samples of squared gradients.

    Each batch is moved to the model's device; ``loss_of(model, batch)`` gives each sample's
    loss; the gradient of each sample's loss is taken separately (see the module docstring
    for how) and its square accumulated. The model is left as it was: values, train/eval
    modes, ``requires_grad`` flags and ``.grad`` tensors (never written).

    Args:
        model: the model (its trainable parameters, ``requires_grad=True``, get a Fisher).
        batches: batches of the model's data (its slice); their tensors' first dimension is
            the sample dimension.
        loss_of: ``loss_of(model, batch) -> Tensor[B]``, one loss per sample.
        max_samples: use at most this many samples (the last batch is cut); ``None`` for all.
        method: ``"vmap"``, ``"loop"``, or ``"auto"`` (``vmap``, else the loop).

    Returns:
        ``{parameter name: Fisher}`` with the parameter's shape, in at least float32, on the
        parameter's device, for every trainable parameter (names as in
        ``model.named_parameters()``).

    Raises:
        ConfigurationError: no trainable parameter, no sample, ``max_samples`` not positive,
            an unknown ``method``, or ``loss_of`` not returning one loss per sample.

    Example:
        >>> def loss_of(model, batch):  # doctest: +SKIP
        ...     x, y = batch
        ...     return F.cross_entropy(model(x), y, reduction="none")
        >>> fisher = diagonal_fisher(specialist, slice_loader, loss_of)  # doctest: +SKIP
    """
    if max_samples is not None and (
        not isinstance(max_samples, int) or isinstance(max_samples, bool) or max_samples < 1
    ):
        raise ConfigurationError(
            f"max_samples must be a positive integer or None, got {max_samples!r}"
        )
    if method not in ("auto", "vmap", "loop"):
        raise ConfigurationError(f"method must be 'auto', 'vmap' or 'loop', got {method!r}")
    params = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if not params:
        raise ConfigurationError(
            "diagonal_fisher: the model has no trainable parameter (requires_grad=True)"
        )
    sums = {
        name: torch.zeros(p.shape, dtype=accumulator_dtype(p.dtype), device=p.device)
        for name, p in params.items()
    }
    chunk = max(1, PER_SAMPLE_BUDGET // sum(p.numel() for p in params.values()))
    use_vmap = method != "loop"
    seen = 0
    with kept_modes(model), torch.enable_grad():
        model.eval()
        for raw in batches_on(model, batches):
            remaining = None if max_samples is None else max_samples - seen
            batch, count = _take(raw, remaining)
            if count == 0:
                continue
            if use_vmap and seen == 0:
                # Once, on the whole batch: a mean loss reads as a batch of one under vmap.
                with torch.no_grad():
                    _check_losses(loss_of(model, batch), count)
            if use_vmap:
                try:
                    squares = _vmap_squares(model, params, batch, count, loss_of, chunk)
                except ConfigurationError:
                    raise
                except Exception as error:
                    if method == "vmap":
                        raise
                    log.info("per-sample gradients by a loop: vmap failed (%s)", error)
                    use_vmap = False
            if not use_vmap:
                squares = _loop_squares(model, params, batch, count, loss_of)
            for name, square in squares.items():
                sums[name].add_(square)
            seen += count
            if max_samples is not None and seen >= max_samples:
                break
    if seen == 0:
        raise ConfigurationError(
            "diagonal_fisher: the batches held no sample; expected at least one batch"
        )
    return {name: total.div_(seen) for name, total in sums.items()}


def _take(batch: Any, limit: int | None) -> tuple[Any, int]:
    """The batch cut to its first ``limit`` samples, and its number of samples."""
    leaves, spec = pytree.tree_flatten(batch)
    count = next((int(t.shape[0]) for t in leaves if _batched(t)), 0)
    if limit is None or limit >= count:
        return batch, count
    cut = [t[:limit] if _batched(t) and t.shape[0] == count else t for t in leaves]
    return pytree.tree_unflatten(cut, spec), limit


def _batched(leaf: Any) -> bool:
    return isinstance(leaf, torch.Tensor) and leaf.dim() > 0


def _vmap_squares(
    model: nn.Module,
    params: Mapping[str, torch.Tensor],
    batch: Any,
    count: int,
    loss_of: LossOf,
    chunk: int,
) -> dict[str, torch.Tensor]:
    leaves, spec = pytree.tree_flatten(batch)
    dims = [0 if _batched(t) and t.shape[0] == count else None for t in leaves]
    wrapped = _LossModule(model, loss_of)

    def sample_loss(values: dict[str, torch.Tensor], *sample: Any) -> torch.Tensor:
        # Inside vmap each leaf lost its sample dimension: a batch of one again for loss_of.
        one = [t.unsqueeze(0) if d == 0 else t for t, d in zip(sample, dims, strict=True)]
        loss = functional_call(wrapped, values, (pytree.tree_unflatten(one, spec),))
        _check_losses(loss, 1)
        return loss.sum()

    detached = {f"model.{name}": p.detach() for name, p in params.items()}
    per_sample = vmap(grad(sample_loss), in_dims=(None, *dims), chunk_size=chunk)(detached, *leaves)
    return {name: _sum_of_squares(per_sample[f"model.{name}"]) for name in params}


def _sum_of_squares(per_sample: torch.Tensor) -> torch.Tensor:
    values = per_sample.to(accumulator_dtype(per_sample.dtype))
    return (values * values).sum(0)


class _LossModule(nn.Module):
    """``loss_of(model, batch)`` as a module, so ``functional_call`` can swap the weights."""

    def __init__(self, model: nn.Module, loss_of: LossOf) -> None:
        super().__init__()
        self.model = model
        self._loss_of = loss_of

    def forward(self, batch: Any) -> torch.Tensor:
        return self._loss_of(self.model, batch)


def _loop_squares(
    model: nn.Module,
    params: Mapping[str, torch.Tensor],
    batch: Any,
    count: int,
    loss_of: LossOf,
) -> dict[str, torch.Tensor]:
    losses = loss_of(model, batch)
    _check_losses(losses, count)
    names, tensors = list(params), list(params.values())
    squares = {
        name: torch.zeros(p.shape, dtype=accumulator_dtype(p.dtype), device=p.device)
        for name, p in params.items()
    }
    for i in range(count):
        grads = torch.autograd.grad(
            losses[i], tensors, retain_graph=i + 1 < count, allow_unused=True
        )
        for name, g in zip(names, grads, strict=True):
            if g is not None:
                squares[name].add_(g.to(squares[name].dtype).square())
    return squares


def _check_losses(losses: Any, count: int) -> None:
    if not isinstance(losses, torch.Tensor) or tuple(losses.shape) != (count,):
        got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses).__name__
        raise ConfigurationError(
            f"loss_of(model, batch) returned {got} for a batch of {count} samples; expected one "
            f"loss per sample, a tensor of shape ({count},) (use reduction='none')"
        )


def fisher_merge(
    models: Sequence[nn.Module],
    fishers: Sequence[Mapping[str, torch.Tensor]],
    floor: float = 1e-8,
    weights: Sequence[float] | None = None,
) -> nn.Module:
    """Fisher-weighted average: ``theta = sum_i F_i * theta_i / sum_i F_i``, elementwise.

    Each ``F_i`` is clamped below by ``floor`` first, so a weight with no Fisher anywhere
    becomes the plain mean (with ``floor=0`` such weights get the plain mean too, and the
    others exact Fisher weights). Parameters that no Fisher covers (frozen ones) and
    floating-point buffers get the plain mean; integer buffers are those of ``models[0]``.
    With BatchNorm, recompute the statistics afterwards
    (:func:`onthefly.forks.soup.recompute_bn`): mean statistics belong to no model.

    ``weights`` scale each model's Fisher: ``F_i -> w_i * max(F_i, floor)`` (Matena & Raffel's
    per-model weights; the plain means become ``w``-weighted means). :func:`diagonal_fisher`
    returns a mean over samples, so models whose slices differ in size count alike by
    default; ``weights=[n_1, n_2, ...]`` — the number of samples behind each Fisher — turns
    each into the Fisher information of its whole slice, so a specialist's few samples do
    not outweigh the parent's many on weights both need. That is the recommended use.

    Args:
        models: one or more models of one architecture.
        fishers: one ``{parameter name: Fisher}`` per model, as :func:`diagonal_fisher`
            returns; all of them cover the same parameters.
        floor: the smallest Fisher value used (a small positive number; ``0`` allowed).
        weights: one non-negative factor per model (a positive sum); ``None`` for 1 each.

    Returns:
        A new model (a deep copy of ``models[0]`` with the merged values).

    Raises:
        ConfigurationError: no models, architectures that differ, not one Fisher per model,
            a Fisher for a tensor the model has no parameter of that name or shape, Fishers
            that cover different parameters, a negative or non-finite Fisher value, a
            negative or non-finite ``floor``, or weights of the wrong length or negative.

    Example:
        >>> fishers = [diagonal_fisher(m, data, loss_of) for m, data in pairs]  # doctest: +SKIP
        >>> merged = fisher_merge(  # doctest: +SKIP
        ...     [parent, specialist], fishers, weights=[len(rest), len(hard_slice)]
        ... )
    """
    check_models(models)
    floor = float(floor)
    if not (floor >= 0 and math.isfinite(floor)):
        raise ConfigurationError(f"floor must be a finite number >= 0, got {floor}")
    if isinstance(fishers, Mapping) or len(fishers) != len(models):
        got = "a single mapping" if isinstance(fishers, Mapping) else f"{len(fishers)}"
        raise ConfigurationError(
            f"fisher_merge: got {got} Fishers for {len(models)} models; expected one per model"
        )
    covered = _check_fishers(models[0], fishers)

    def weighted(name: str, tensors: Sequence[torch.Tensor], values: list[float]) -> torch.Tensor:
        mean = weighted_mean(tensors, values)
        if name not in covered:
            return mean
        numerator = torch.zeros_like(mean)
        denominator = torch.zeros_like(mean, dtype=accumulator_dtype(fishers[0][name].dtype))
        for tensor, fisher, weight in zip(tensors, fishers, values, strict=True):
            f = fisher[name].to(device=mean.device, dtype=denominator.dtype).clamp(min=floor)
            f.mul_(weight)
            numerator.add_(f * tensor.to(device=mean.device, dtype=mean.dtype))
            denominator.add_(f)
        return torch.where(denominator > 0, numerator / denominator, mean)

    return weighted_copy(models, weights, weighted)


def _check_fishers(model: nn.Module, fishers: Sequence[Mapping[str, torch.Tensor]]) -> set[str]:
    """The parameter names the Fishers cover, after checking them against ``model``."""
    params = dict(model.named_parameters())
    names = set(fishers[0])
    for i, fisher in enumerate(fishers):
        if set(fisher) != names:
            odd = sorted(set(fisher) ^ names)[0]
            raise ConfigurationError(
                f"fishers[{i}] and fishers[0] differ on {odd!r}; expected every Fisher to cover "
                "the same parameters"
            )
        for name, value in fisher.items():
            param = params.get(name)
            if param is None:
                raise ConfigurationError(
                    f"fishers[{i}] has {name!r}, which is not a parameter of the models; "
                    "expected names as in model.named_parameters()"
                )
            if not isinstance(value, torch.Tensor) or value.shape != param.shape:
                got = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                raise ConfigurationError(
                    f"fishers[{i}][{name!r}] is {got}; expected a tensor of the parameter's "
                    f"shape {list(param.shape)}"
                )
            if not bool(torch.isfinite(value).all()) or bool((value < 0).any()):
                raise ConfigurationError(
                    f"fishers[{i}][{name!r}] has negative or non-finite values; expected a "
                    "Fisher (finite, >= 0)"
                )
    return names
