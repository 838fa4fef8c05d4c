"""Model soups: weight averages of models that share an architecture, and their BatchNorm.

* :func:`average` — the (weighted) mean of the floating-point parameters and buffers;
* :func:`recompute_bn` — fresh BatchNorm running statistics for an averaged model, with the
  semantics of :func:`torch.optim.swa_utils.update_bn` (which it calls);
* :func:`uniform_soup` — the average of all models, then their BatchNorm recomputed (SWA);
* :func:`greedy_soup` — Wortsman et al. 2022, "Model soups": models added best first, each
  kept only if the soup's score improves.

Averaging BatchNorm running statistics gives statistics that belong to no model: the mean of
two variances is not the variance of the averaged network's activations. That is why a soup
recomputes them over a sample of the data whenever it is given one.

Every function leaves its input models untouched and returns a new model (a deep copy of the
first one, so it sits on that model's device).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from torch import nn
from torch.optim.swa_utils import update_bn

from onthefly.errors import ConfigurationError
from onthefly.forks._models import (
    batches_on,
    check_models,
    kept_modes,
    weighted_copy,
    weighted_mean,
)

Forward = Callable[[nn.Module, Any], Any]
"""``forward(model, batch) -> outputs``; the batch is already on the model's device."""

Score = Callable[[nn.Module], float]
"""``score(model) -> float``, lower is better (a held-out loss)."""


def default_forward(model: nn.Module, batch: Any) -> Any:
    """``model(batch[0])`` for a tuple or list batch, else ``model(batch)`` (as ``update_bn``)."""
    return model(batch[0] if isinstance(batch, list | tuple) else batch)


def average(models: Sequence[nn.Module], weights: Sequence[float] | None = None) -> nn.Module:
    """The (weighted) mean of models that share an architecture, as a new model.

    A deep copy of ``models[0]`` whose floating-point parameters and buffers are
    ``sum_i w_i * t_i / sum_i w_i`` (computed in at least float32, on ``models[0]``'s device);
    integer buffers (``num_batches_tracked``) are those of ``models[0]``. BatchNorm running
    statistics are averaged like any buffer: call :func:`recompute_bn` to get real ones.

    Args:
        models: one or more models of one architecture (same tensor names, shapes, dtypes).
        weights: one non-negative weight per model (they need not sum to 1); ``None`` for
            the plain mean.

    Raises:
        ConfigurationError: no models, architectures that differ (the first differing tensor
            is named), or weights of the wrong length, negative or summing to zero.

    Example:
        >>> soup = average([parent, specialist], weights=[3, 1])  # doctest: +SKIP
    """
    check_models(models)
    return weighted_copy(models, weights, lambda _, tensors, values: weighted_mean(tensors, values))


def recompute_bn(
    model: nn.Module,
    batches: Iterable[Any],
    forward: Forward | None = None,
    max_batches: int | None = None,
) -> bool:
    """Reset every BatchNorm's running statistics and recompute them over ``batches``, in place.

    Calls :func:`torch.optim.swa_utils.update_bn`, so the semantics are exactly its own: the
    statistics are reset, then accumulated as a cumulative average over the batches
    (``momentum=None``) in train mode under ``no_grad``, and each BatchNorm's momentum is put
    back. On top of it, each batch is moved to the model's device and passed through
    ``forward`` (any batch structure), at most ``max_batches`` batches are used, and every
    module's own train/eval mode is restored (``update_bn`` only restores the top module's).

    Forward passes in train mode draw random numbers (dropout): fork the RNGs around the call
    to leave a run's streams untouched.

    Args:
        model: the model to update.
        batches: an iterable of batches (a ``DataLoader``, a list).
        forward: ``forward(model, batch)``; default :func:`default_forward`.
        max_batches: stop after this many batches; ``None`` for all.

    Returns:
        ``False`` when the model has no BatchNorm (nothing is done, no batch is drawn), else
        ``True``.

    Raises:
        ConfigurationError: ``max_batches`` not a positive integer, or ``batches`` yielding no
            batch (the statistics are then left as they were).

    Example:
        >>> recompute_bn(soup, train_loader, max_batches=50)  # doctest: +SKIP
    """
    if max_batches is not None and (not _is_int(max_batches) or max_batches < 1):
        raise ConfigurationError(
            f"max_batches must be a positive integer or None, got {max_batches!r}"
        )
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return False
    iterator = iter(batches)
    first = next(iterator, _NONE)
    if first is _NONE:
        raise ConfigurationError(
            "recompute_bn: the batches yielded no batch; expected at least one batch to compute "
            "BatchNorm statistics from (an exhausted iterator cannot be reused: pass a list or "
            "a DataLoader)"
        )
    chosen = itertools.islice(itertools.chain([first], iterator), max_batches)
    # update_bn feeds ``batch[0]`` of a tuple to its module: wrapping each batch in a 1-tuple
    # hands the whole batch to a module that calls ``forward``.
    wrapped = ((batch,) for batch in batches_on(model, chosen))
    with kept_modes(model):
        update_bn(wrapped, _Forwarding(model, forward or default_forward))
    return True


_NONE = object()


class _Forwarding(nn.Module):
    """``model`` as a submodule (so ``update_bn`` finds its BatchNorms) called via ``forward``."""

    def __init__(self, model: nn.Module, forward: Forward) -> None:
        super().__init__()
        self.model = model
        self._call = forward

    def forward(self, batch: Any) -> Any:
        return self._call(self.model, batch)


def uniform_soup(
    models: Sequence[nn.Module],
    bn_batches: Iterable[Any] | None = None,
    forward: Forward | None = None,
    max_batches: int | None = None,
) -> nn.Module:
    """The plain average of ``models`` (SWA), its BatchNorm recomputed when given data.

    Args:
        models: one or more models of one architecture.
        bn_batches: batches to recompute BatchNorm statistics over (a sample of the training
            data); ``None`` keeps the averaged statistics.
        forward: ``forward(model, batch)`` for the recompute; default :func:`default_forward`.
        max_batches: at most this many batches for the recompute.

    Raises:
        ConfigurationError: as :func:`average` and :func:`recompute_bn`.

    Example:
        >>> soup = uniform_soup([parent, specialist], bn_batches=train_loader)  # doctest: +SKIP
    """
    soup = average(models)
    if bn_batches is not None:
        recompute_bn(soup, bn_batches, forward, max_batches)
    return soup


def greedy_soup(
    models: Sequence[nn.Module],
    score: Score,
    bn_batches: Iterable[Any] | None = None,
    forward: Forward | None = None,
    max_batches: int | None = None,
) -> tuple[nn.Module, list[int]]:
    """Greedy soup (Wortsman et al. 2022): ingredients added best first while the score improves.

    Each model is scored on its own; they are then visited from the best (lowest) score to
    the worst (ties in the given order). The soup starts as a copy of the best model; each
    next model is kept only if the uniform average of the kept models plus it — with its
    BatchNorm recomputed when ``bn_batches`` is given — scores strictly lower than the soup so
    far. A ``NaN`` score never improves anything. ``score`` is called ``2 * len(models) - 1``
    times; it should put the model in eval mode itself if it needs to.

    Args:
        models: one or more models of one architecture.
        score: ``score(model) -> float``, lower is better (e.g. the held-out loss).
        bn_batches: batches for each candidate's BatchNorm recompute; iterated once per
            candidate (a one-shot iterator is first gathered into a list).
        forward: ``forward(model, batch)`` for the recompute; default :func:`default_forward`.
        max_batches: at most this many batches per recompute.

    Returns:
        The soup (a new model, the very one that got the best score) and the indices of the
        kept models into ``models``, in the order they were added.

    Raises:
        ConfigurationError: as :func:`uniform_soup`.

    Example:
        >>> soup, kept = greedy_soup(models, score=lambda m: val_loss(m))  # doctest: +SKIP
    """
    check_models(models)
    if bn_batches is not None and iter(bn_batches) is bn_batches:
        bn_batches = list(itertools.islice(bn_batches, max_batches))
    scores = [_score(score, model) for model in models]
    order = sorted(range(len(models)), key=lambda i: (_worst_if_nan(scores[i]), i))
    kept = [order[0]]
    soup, best = average([models[order[0]]]), scores[order[0]]
    for index in order[1:]:
        candidate = uniform_soup(
            [models[i] for i in [*kept, index]], bn_batches, forward, max_batches
        )
        value = _score(score, candidate)
        if value < best:
            soup, best = candidate, value
            kept.append(index)
    return soup, kept


def _score(score: Score, model: nn.Module) -> float:
    value = score(model)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(
            f"score(model) returned {value!r}; expected a number (lower is better)"
        ) from None


def _worst_if_nan(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


__all__ = [
    "Forward",
    "Score",
    "average",
    "default_forward",
    "greedy_soup",
    "recompute_bn",
    "uniform_soup",
]
