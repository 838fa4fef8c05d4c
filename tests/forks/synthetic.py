"""A small classification task with a known hard minority region, for fork and merge tests.

Inputs are points of the square ``[-3, 3]^2``; there are three classes.

* 90 % of the samples (the *easy* ones) follow a band rule: class 0 for ``x0 < -1``, 1 for
  ``-1 <= x0 < 1``, 2 for ``x0 >= 1``;
* 10 % (the *hard* slice) lie in four small discs (radius :data:`HARD_RADIUS`, centres
  :data:`HARD_CENTRES`, in the bands of classes 0 and 2) and follow another rule: class 1
  above a disc's centre line; below it, the class that is neither 1 nor the band's.

A parent trained briefly on everything (:data:`PARENT_STEPS`) learns the bands and under-fits
the discs (it mostly answers the band's class there); a specialist — a copy of it trained on
the hard slice only (:data:`SPECIALIST_STEPS`) — lowers the hard slice's loss and raises the
rest's. The discs sit symmetrically around the origin so that a batch of hard samples has
about the statistics of a batch of all samples: a specialist's BatchNorm then stays sane
(a slice packed in one tiny region would be normalised by its own tiny variance in train
mode and wreck the specialist on everything else).

Everything is seeded and small (a few hundred milliseconds on one CPU thread). The model is
an MLP with a ``BatchNorm1d``, so merges have BatchNorm statistics to recompute.

Example:
    >>> task = make_task()
    >>> parent = train(make_model(), task.train, steps=PARENT_STEPS, lr=PARENT_LR)
    >>> specialist = train(copy.deepcopy(parent), task.train, task.hard_train_idx,
    ...                    steps=SPECIALIST_STEPS, lr=SPECIALIST_LR)
    >>> hard = task.hard_val_idx
    >>> loss_on(specialist, task.val, hard) < loss_on(parent, task.val, hard)
    True
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import TensorDataset

HARD_CENTRES = ((2.0, 2.0), (2.0, -2.0), (-2.0, 2.0), (-2.0, -2.0))
HARD_RADIUS = 0.6
HARD_FRACTION = 0.1

PARENT_STEPS, PARENT_LR = 300, 1e-2
"""The parent's budget (Adam, batch 64): enough for the bands, too little for the discs."""

SPECIALIST_STEPS, SPECIALIST_LR = 20, 1e-3
"""The specialist's budget on the hard slice (Adam, batch 64): a short fine-tune of the parent."""

Batch = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Task:
    """The data: training and validation sets and the indices of their hard samples."""

    train: TensorDataset
    val: TensorDataset
    hard_train_idx: list[int]
    hard_val_idx: list[int]

    @property
    def rest_train_idx(self) -> list[int]:
        """The training samples outside the hard slice."""
        hard = set(self.hard_train_idx)
        return [i for i in range(len(self.train)) if i not in hard]


def make_task(seed: int = 0, n_train: int = 2000, n_val: int = 1000) -> Task:
    """The task's data, the same for the same arguments."""
    generator = torch.Generator().manual_seed(seed)
    train, hard_train = _split(n_train, generator)
    val, hard_val = _split(n_val, generator)
    return Task(train, val, hard_train, hard_val)


def _split(n: int, generator: torch.Generator) -> tuple[TensorDataset, list[int]]:
    n_hard = round(n * HARD_FRACTION)
    centres = torch.tensor(HARD_CENTRES)
    # Easy points: uniform in the square, those that fall in a disc drawn again.
    easy = torch.empty(0, 2)
    while len(easy) < n - n_hard:
        draw = torch.rand(2 * n, 2, generator=generator) * 6 - 3
        outside = torch.cdist(draw, centres).min(dim=1).values > HARD_RADIUS
        easy = torch.cat([easy, draw[outside]])
    easy = easy[: n - n_hard]
    # Hard points: uniform in a disc picked at random.
    centre = centres[torch.randint(len(centres), (n_hard,), generator=generator)]
    radius = HARD_RADIUS * torch.rand(n_hard, generator=generator).sqrt()
    angle = torch.rand(n_hard, generator=generator) * 2 * torch.pi
    hard = centre + torch.stack([radius * angle.cos(), radius * angle.sin()], dim=1)
    easy_y = _band(easy)
    # Above its centre line a disc is class 1, below it the class of neither band nor 1.
    hard_y = torch.where(hard[:, 1] > centre[:, 1], 1, 2 - _band(hard))
    x, y = torch.cat([easy, hard]), torch.cat([easy_y, hard_y])
    order = torch.randperm(n, generator=generator)
    is_hard = torch.arange(n) >= n - n_hard
    hard_idx = torch.nonzero(is_hard[order]).flatten().tolist()
    return TensorDataset(x[order], y[order]), hard_idx


def _band(x: torch.Tensor) -> torch.Tensor:
    return (x[:, 0] >= -1).long() + (x[:, 0] >= 1).long()


def make_model(seed: int = 0) -> nn.Module:
    """``Linear(2, 32) -> BatchNorm1d -> ReLU -> Linear(32, 32) -> ReLU -> Linear(32, 3)``."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(2, 32),
        nn.BatchNorm1d(32),
        nn.ReLU(),
        nn.Linear(32, 32),
        nn.ReLU(),
        nn.Linear(32, 3),
    )


def train(
    model: nn.Module,
    dataset: TensorDataset,
    indices: Sequence[int] | None = None,
    *,
    steps: int,
    lr: float,
    seed: int = 0,
    batch_size: int = 64,
) -> nn.Module:
    """Train ``model`` in place with Adam on ``dataset`` (or its ``indices``); returns it.

    Each step draws ``batch_size`` samples uniformly (with replacement, seeded by ``seed``).
    The model's train/eval modes are restored afterwards.
    """
    x, y = dataset.tensors
    pool = torch.arange(len(x)) if indices is None else torch.as_tensor(list(indices))
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    was_training = model.training
    model.train()
    for _ in range(steps):
        chosen = pool[torch.randint(len(pool), (batch_size,), generator=generator)]
        loss = F.cross_entropy(model(x[chosen]), y[chosen])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.train(was_training)
    return model


def loss_on(
    model: nn.Module, dataset: TensorDataset, indices: Sequence[int] | None = None
) -> float:
    """The mean cross-entropy of ``model`` on ``dataset`` (or its ``indices``), in eval mode."""
    x, y = dataset.tensors
    if indices is not None:
        x, y = x[list(indices)], y[list(indices)]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        loss = F.cross_entropy(model(x), y)
    model.train(was_training)
    return float(loss)


def batches(
    dataset: TensorDataset, indices: Sequence[int] | None = None, batch_size: int = 128
) -> list[Batch]:
    """``(x, y)`` batches of ``dataset`` (or its ``indices``), in order: a re-iterable list."""
    x, y = dataset.tensors
    if indices is not None:
        x, y = x[list(indices)], y[list(indices)]
    return [(x[i : i + batch_size], y[i : i + batch_size]) for i in range(0, len(x), batch_size)]


def sample_losses(model: nn.Module, batch: Batch) -> torch.Tensor:
    """Each sample's cross-entropy (a ``LossOf`` for the merge functions)."""
    x, y = batch
    return F.cross_entropy(model(x), y, reduction="none")


def logits(model: nn.Module, batch: Batch) -> torch.Tensor:
    """The model's logits for a batch (a ``Forward`` for the merge functions)."""
    return model(batch[0])


def parent_and_specialist(seed: int = 0) -> tuple[nn.Module, nn.Module]:
    """Fresh copies of the trained parent and of its specialist on the hard slice."""
    parent, specialist = _trained(seed)
    return copy.deepcopy(parent), copy.deepcopy(specialist)


@functools.cache
def _trained(seed: int) -> tuple[nn.Module, nn.Module]:
    task = make_task(seed)
    parent = train(make_model(seed), task.train, steps=PARENT_STEPS, lr=PARENT_LR, seed=seed)
    specialist = train(
        copy.deepcopy(parent),
        task.train,
        task.hard_train_idx,
        steps=SPECIALIST_STEPS,
        lr=SPECIALIST_LR,
        seed=seed,
    )
    return parent, specialist


VAL_TOLERANCE = (1.10, 0.02)
"""A merge may raise the full validation loss to ``parent * 1.10 + 0.02``, no more."""


def tolerated(parent_loss: float) -> float:
    """The highest full validation loss a merge may have, given the parent's."""
    factor, margin = VAL_TOLERANCE
    return parent_loss * factor + margin
