"""The five merge methods, applied to a run: the parent and its forks in, a merged model out.

The arithmetic lives in :mod:`~onthefly.forks.soup`, :mod:`~onthefly.forks.fisher`,
:mod:`~onthefly.forks.distill` and :mod:`~onthefly.forks.adapters`; here it gets the run's
data and models:

* ``soup`` — the (weighted) average of parent and forks, BatchNorm statistics recomputed over
  a fixed sample of the training set;
* ``greedy`` — greedy soup scored on validation (the error rate of a classifier, else the
  loss: :func:`onthefly.forks.gate.figure`; so it needs a validation loader);
* ``fisher`` — each model's diagonal Fisher on its own data (a fork's slice; for the parent,
  the rest of the training set), Fisher-weighted average, BatchNorm recomputed;
* ``distill`` — a copy of the parent trained toward each fork's outputs on its slice and on
  its own targets on the rest (an optimizer of the run's kind: SGD, Adam or AdamW);
* ``adapter`` — the forks' adapter updates folded into the parent's weights.

Forks made with adapters take part in the other methods as plain models (their updates
folded into their own base weights). Nothing here changes the parent or the forks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from onthefly.batches import unpack
from onthefly.errors import ConfigurationError
from onthefly.forks import adapters, soup
from onthefly.forks._models import device_of, to_device
from onthefly.forks.distill import distill
from onthefly.forks.fisher import diagonal_fisher, fisher_merge
from onthefly.forks.slice_loader import subset_loader
from onthefly.samples.loss_spec import LossSpec

BN_SAMPLES = 4096
"""Training samples (a fixed random sample) that BatchNorm statistics are recomputed over."""

FISHER_SAMPLES = 1024
"""Samples per model that its diagonal Fisher is estimated from."""

SAMPLE_SEED = 1


@dataclass
class MergeData:
    """What the methods need from the run.

    Attributes:
        train: the run's training ``DataLoader`` (its settings; never iterated).
        spec: the run's loss function.
        slices: each fork's slice (training-set indices), in the order of the forks.
        rest: training-set indices outside the slices (a sample).
        score: a model's validation figure, lower is better (``greedy``), or ``None``
            without validation data.
        cancelled: ``True`` stops a distillation early.
    """

    train: DataLoader
    spec: LossSpec
    slices: list[Sequence[int]]
    rest: Sequence[int]
    score: Callable[[nn.Module], float] | None = None
    cancelled: Callable[[], bool] = lambda: False


@dataclass
class Options:
    """The ``merge`` command's settings (see :class:`onthefly.protocol.Merge`)."""

    weights: list[float] | None = None
    steps: int = 100
    lr: float | None = None
    temperature: float = 2.0
    strength: float = 1.0
    optimizer: str = "sgd"


@dataclass
class Merged:
    """A merged model and what the method reports: ``kept`` (greedy: indices into
    ``[parent, *forks]``), ``stats`` (distill)."""

    model: nn.Module
    kept: list[int] | None = None
    stats: dict[str, float] = field(default_factory=dict)


def forward(model: nn.Module, batch: Any) -> Any:
    """``model(inputs)`` of a batch on the model's device, as the scans call the model."""
    inputs, _ = unpack(to_device(batch, device_of(model)))
    return model(inputs)


def per_sample_loss(spec: LossSpec) -> Callable[[nn.Module, Any], torch.Tensor]:
    """``loss_of(model, batch) -> Tensor[B]``: the run's loss per sample, differentiable
    (non-batch dimensions averaged)."""

    def loss_of(model: nn.Module, batch: Any) -> torch.Tensor:
        inputs, target = unpack(to_device(batch, device_of(model)))
        elements = spec.unreduced(model(inputs), target)
        n = int(target.shape[0]) if isinstance(target, torch.Tensor) and target.ndim else 1
        return elements.reshape(n, -1).mean(1) if elements.ndim != 1 else elements

    return loss_of


def plain(model: nn.Module) -> nn.Module:
    """``model`` with its adapter updates folded into its weights (a model without adapters
    is returned as it is). ``model`` is consumed: its adapters are stripped in place, so pass
    a copy of your own (:func:`~onthefly.forks.host.fork_model` makes one per merge)."""
    if not any(isinstance(m, adapters.LoRALinear) for m in model.modules()):
        return model
    deltas = adapters.adapter_deltas(model)
    return adapters.fold_adapters(adapters.strip_adapters(model), [deltas])


def merge(
    method: str,
    parent: nn.Module,
    forks: Sequence[nn.Module],
    data: MergeData,
    options: Options,
) -> Merged:
    """The merge of ``parent`` and ``forks`` by ``method`` (a new model).

    Raises:
        ConfigurationError: the method cannot apply (no validation data for ``greedy``, forks
            without adapters for ``adapter``, models of different architectures, ...).
    """
    if method == "adapter":
        return Merged(_adapter(parent, forks, options))
    models = [parent, *(plain(fork) for fork in forks)]
    sample = _sample(len(data.train.dataset), BN_SAMPLES)  # type: ignore[arg-type]
    bn = _loader(data.train, sample)
    if method == "soup":
        merged = soup.average(models, options.weights)
        soup.recompute_bn(merged, bn, forward)
        return Merged(merged)
    if method == "greedy":
        if data.score is None:
            raise ConfigurationError(
                "a greedy soup scores models on the validation set; this run has no "
                "validation loader (pass val_loader= to fit())"
            )
        merged, kept = soup.greedy_soup(models, data.score, bn, forward)
        return Merged(merged, kept=kept)
    loss_of = per_sample_loss(data.spec)
    if method == "fisher":
        # The parent's data is the rest of the training set (a sample when the slices
        # cover it all).
        sources = [data.rest if len(data.rest) else sample, *data.slices]
        fishers = [
            diagonal_fisher(model, _loader(data.train, ids), loss_of, max_samples=FISHER_SAMPLES)
            for model, ids in zip(models, sources, strict=True)
        ]
        # Each Fisher is a mean over its samples: weigh it by how many it saw, so that a
        # 200-sample slice does not count as much as the rest of the training set.
        counts = [min(len(ids), FISHER_SAMPLES) for ids in sources]
        merged = fisher_merge(models, fishers, weights=counts)
        soup.recompute_bn(merged, bn, forward)
        return Merged(merged)
    if method == "distill":
        return _distill(parent, models[1:], data, options, loss_of)
    raise ConfigurationError(
        f"unknown merge method {method!r}; expected soup, greedy, fisher, distill or adapter"
    )


def _adapter(parent: nn.Module, forks: Sequence[nn.Module], options: Options) -> nn.Module:
    deltas = []
    for i, fork in enumerate(forks):
        if not any(isinstance(m, adapters.LoRALinear) for m in fork.modules()):
            raise ConfigurationError(
                f"fork {i + 1} of the merge has no adapters; an adapter merge takes forks made "
                "with adapter_rank"
            )
        deltas.append(adapters.adapter_deltas(fork))
    return adapters.fold_adapters(parent, deltas, options.weights)


def _distill(
    parent: nn.Module,
    teachers: Sequence[nn.Module],
    data: MergeData,
    options: Options,
    loss_of: Callable[[nn.Module, Any], torch.Tensor],
) -> Merged:
    from onthefly.forks.spawn import model_copy

    if options.lr is None:
        raise ConfigurationError("distill needs a learning rate; expected lr > 0")
    student = model_copy(parent)
    stats = distill(
        student,
        [
            (teacher, _loader(data.train, ids, shuffle=True))
            for teacher, ids in zip(teachers, data.slices, strict=True)
        ],
        _loader(data.train, data.rest, shuffle=True) if len(data.rest) else None,
        loss_of,
        forward,
        steps=options.steps,
        lr=options.lr,
        temperature=options.temperature,
        optimizer=options.optimizer,  # type: ignore[arg-type]
        cancelled=data.cancelled,
        strength=options.strength,
    )
    return Merged(student, stats=stats)


def optimizer_kind(optimizer: torch.optim.Optimizer) -> str:
    """The distillation optimizer closest to the run's: ``adamw``, ``adam`` or ``sgd``."""
    if isinstance(optimizer, torch.optim.AdamW):
        return "adamw"
    if isinstance(optimizer, torch.optim.Adam):
        return "adam"
    return "sgd"


def _sample(size: int, count: int) -> list[int]:
    """A fixed random sample of ``count`` indices of ``range(size)`` (all when fewer)."""
    if size <= count:
        return list(range(size))
    picked = np.random.default_rng(SAMPLE_SEED).choice(size, count, replace=False)
    return np.sort(picked).tolist()


def _loader(train: DataLoader, ids: Sequence[int], shuffle: bool = False) -> DataLoader:
    return subset_loader(train, list(ids), shuffle=shuffle, drop_last=False)
