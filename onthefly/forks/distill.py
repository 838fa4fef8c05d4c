"""Distillation: the parent (student) learns the specialists' outputs on their slices.

:func:`distill` trains the student in place for a budget of optimizer steps. The steps go
round-robin over the sources — each teacher's slice, then the rest of the training set — so
every source gets the same share of the budget:

* on a teacher's slice, the loss pulls the student's outputs toward the teacher's (Hinton et
  al. 2015): ``KL(softmax(teacher / T) || softmax(student / T)) * T**2`` for logits (the
  ``T**2`` keeps gradient magnitudes comparable across temperatures), averaged over samples
  (and over positions for outputs with more than two dimensions); the mean squared error
  for regression outputs (1-D, or a last dimension of 1);
* on the rest of the training set, the student's own loss (``loss_of``, averaged), so what
  it already does well is kept.

The student trains with an optimizer of its own, made fresh here (the run's optimizer and its
state are neither used nor changed); the teachers run in eval mode under ``no_grad`` and are
not changed; every module's train/eval mode and the student's ``.grad`` tensors are put back
afterwards. No gradient clipping, no mixed precision: what ``outputs_of`` and ``loss_of`` do
is all there is. Forward passes in train mode draw random numbers (dropout): fork the RNGs
around the call to leave a run's streams untouched.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

import torch
from torch import nn
from torch.nn import functional as F

from onthefly.errors import ConfigurationError
from onthefly.forks._models import device_of, kept_modes, to_device
from onthefly.forks.fisher import LossOf
from onthefly.forks.soup import Forward

OptimizerName = Literal["sgd", "adam", "adamw"]

_OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "sgd": torch.optim.SGD,
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
}


def distill(
    student: nn.Module,
    teachers: Sequence[tuple[nn.Module, Iterable[Any]]],
    rest: Iterable[Any] | None,
    loss_of: LossOf,
    outputs_of: Forward,
    steps: int,
    lr: float,
    temperature: float = 2.0,
    optimizer: OptimizerName = "sgd",
    cancelled: Callable[[], bool] | None = None,
    strength: float = 1.0,
) -> dict[str, float]:
    """Train ``student`` in place toward the teachers' outputs on their slices.

    See the module docstring for the losses and what is left untouched. The sources take
    turns one step each (teacher 0, teacher 1, ..., rest, teacher 0, ...); a source's batches
    are iterated again from the start when they run out. ``cancelled()`` is checked before
    every step.

    Args:
        student: the model trained (in place); its trainable parameters are optimized.
        teachers: ``(teacher, slice batches)`` pairs.
        rest: batches of the rest of the training set (trained with ``loss_of``); ``None`` to
            distill only.
        loss_of: ``loss_of(model, batch) -> Tensor[B]``, the per-sample training loss.
        outputs_of: ``outputs_of(model, batch) -> Tensor``, the outputs that are distilled
            (logits ``[B, C]`` or ``[B, ..., C]``; ``[B]`` or ``[B, 1]`` for regression).
        steps: optimizer steps (``0`` does nothing).
        lr: the learning rate of the fresh optimizer.
        temperature: the softmax temperature ``T`` for logits.
        optimizer: ``"sgd"`` (plain, no momentum), ``"adam"`` or ``"adamw"`` (defaults of
            :mod:`torch.optim` besides ``lr``).
        cancelled: returns ``True`` to stop before the next step.
        strength: the weight of the distillation loss on the teachers' steps (the rest's
            own loss keeps weight 1): below 1 the student holds on to what it knew.

    Returns:
        ``steps`` (steps done), ``distill_loss`` and ``own_loss`` (the last step's loss of
        each kind, ``NaN`` if none was done) and ``cancelled`` (1.0 when stopped early).

    Raises:
        ConfigurationError: no teacher, ``steps`` not an integer >= 0, ``lr``,
            ``temperature`` or ``strength`` not a positive finite number, an unknown
            optimizer, a student with no trainable parameter, a source with no batch,
            outputs that are not tensors or whose shapes differ between student and teacher.

    Example:
        >>> stats = distill(  # doctest: +SKIP
        ...     parent, [(specialist, slice_loader)], rest_loader, loss_of,
        ...     outputs_of=lambda m, b: m(b[0]), steps=200, lr=1e-2,
        ... )
    """
    _check_arguments(teachers, steps, lr, temperature, optimizer, strength)
    params = [p for p in student.parameters() if p.requires_grad]
    if not params:
        raise ConfigurationError("distill: the student has no trainable parameter")
    grads = [p.grad for p in params]
    opt = _OPTIMIZERS[optimizer](params, lr=lr)
    device = device_of(student)
    sources: list[tuple[nn.Module | None, _Cycle]] = [
        (teacher, _Cycle(batches, f"teachers[{i}]"))
        for i, (teacher, batches) in enumerate(teachers)
    ]
    if rest is not None:
        sources.append((None, _Cycle(rest, "rest")))
    last: dict[str, torch.Tensor] = {}
    done = 0
    with kept_modes(student, *(teacher for teacher, _ in teachers)):
        student.train()
        for teacher, _ in teachers:
            teacher.eval()
        try:
            for step in range(steps):
                if cancelled is not None and cancelled():
                    break
                source, cycle = sources[step % len(sources)]
                batch = to_device(next(cycle), device)
                if source is None:
                    kind, loss = "own_loss", loss_of(student, batch).mean()
                else:
                    loss = strength * _distill_loss(student, source, batch, outputs_of, temperature)
                    kind = "distill_loss"
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                last[kind] = loss.detach()
                done += 1
        finally:
            for param, saved in zip(params, grads, strict=True):
                param.grad = saved
    # One read of the values at the end, not a host sync per step.
    values = {kind: float(value) for kind, value in last.items()}
    return {
        "steps": float(done),
        "distill_loss": values.get("distill_loss", math.nan),
        "own_loss": values.get("own_loss", math.nan),
        "cancelled": float(done < steps),
    }


def _check_arguments(
    teachers: Sequence[tuple[nn.Module, Iterable[Any]]],
    steps: int,
    lr: float,
    temperature: float,
    optimizer: str,
    strength: float = 1.0,
) -> None:
    if len(teachers) == 0:
        raise ConfigurationError("distill: expected at least one (teacher, batches) pair, got none")
    for i, pair in enumerate(teachers):
        if not (
            isinstance(pair, tuple | list) and len(pair) == 2 and isinstance(pair[0], nn.Module)
        ):
            raise ConfigurationError(
                f"teachers[{i}]: expected a (teacher model, batches) pair with an nn.Module "
                f"first, got a {type(pair).__name__}"
            )
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ConfigurationError(f"steps must be an integer >= 0, got {steps!r}")
    for name, value in (("lr", lr), ("temperature", temperature), ("strength", strength)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ConfigurationError(f"{name} must be a positive finite number, got {value!r}")
    if optimizer not in _OPTIMIZERS:
        raise ConfigurationError(
            f"optimizer must be one of {sorted(_OPTIMIZERS)}, got {optimizer!r}"
        )


def _distill_loss(
    student: nn.Module,
    teacher: nn.Module,
    batch: Any,
    outputs_of: Forward,
    temperature: float,
) -> torch.Tensor:
    with torch.no_grad():
        target = _tensor(outputs_of(teacher, batch), "teacher")
    output = _tensor(outputs_of(student, batch), "student")
    target = target.to(device=output.device, dtype=output.dtype)
    if output.shape != target.shape:
        raise ConfigurationError(
            f"the student's outputs have shape {list(output.shape)}, the teacher's "
            f"{list(target.shape)}; expected the same shape"
        )
    if output.dim() <= 1 or output.shape[-1] == 1:
        return F.mse_loss(output, target)
    classes = output.shape[-1]
    student_log = F.log_softmax(output.reshape(-1, classes) / temperature, dim=-1)
    teacher_log = F.log_softmax(target.reshape(-1, classes) / temperature, dim=-1)
    kl = F.kl_div(student_log, teacher_log, reduction="batchmean", log_target=True)
    return kl * temperature**2


def _tensor(value: Any, whose: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ConfigurationError(
            f"outputs_of(model, batch) returned a {type(value).__name__} for the {whose}; "
            "expected a tensor of outputs (logits, or regression values)"
        )
    return value


class _Cycle:
    """The batches of one source, started again from the beginning when they run out."""

    def __init__(self, batches: Iterable[Any], name: str) -> None:
        self.batches, self.name = batches, name
        self.iterator: Iterator[Any] = iter(batches)

    def __next__(self) -> Any:
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.batches)
        try:
            return next(self.iterator)
        except StopIteration:
            raise ConfigurationError(
                f"distill: {self.name} yielded no batch; expected a non-empty, re-iterable "
                "source (a DataLoader or a list; an exhausted iterator cannot start again)"
            ) from None
