"""Changing an optimizer's hyperparameters mid-run so that its scheduler keeps the change.

:func:`plan_changes` validates a request against the optimizer (group exists, the optimizer
has that hyperparameter, a scheduler can follow) before anything is touched;
:func:`apply_changes` writes the param groups and adjusts the schedulers:

* ``lr``: the new/old ratio rescales what the scheduler computes from — ``base_lrs`` (and the
  group's ``initial_lr``) for ``LambdaLR``, ``StepLR``, ``CosineAnnealingLR`` and the other
  base-value schedulers; ``initial_lr`` / ``max_lr`` / ``min_lr`` for ``OneCycleLR``;
  ``base_lrs`` and ``max_lrs`` for ``CyclicLR``; nothing for ``ReduceLROnPlateau`` (it scales
  the current value). ``SequentialLR`` / ``ChainedScheduler`` adjust each child. A scheduler
  of an unknown kind, or a current lr of 0 under a scheduler, is refused.
* ``momentum`` / ``betas``: refused while ``OneCycleLR`` / ``CyclicLR`` cycle them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch.optim import lr_scheduler

from onthefly._representable import check_hparam, floating_dtypes
from onthefly.callbacks._hparam_trial import trial
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError

HPARAMS = ("lr", "weight_decay", "momentum", "betas", "eps")

Value = float | list[float]


@dataclass(frozen=True)
class Change:
    """One hyperparameter of one param group, before and after."""

    optimizer: int
    group: int
    name: str
    old: Value | None
    new: Value

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def undone(self) -> Change:
        """The change that puts this one back."""
        assert self.old is not None
        return Change(self.optimizer, self.group, self.name, self.new, self.old)


def schedulers_of(trainer: TrainerHost) -> list[Any]:
    """The run's LR schedulers (Lightning's ``lr_scheduler_configs`` or the native one)."""
    return driver(trainer).schedulers()


def plan_changes(
    optimizers: Sequence[torch.optim.Optimizer],
    schedulers: Sequence[Any],
    values: dict[str, Any],
    group: int | None = None,
    optimizer: int = 0,
) -> list[Change]:
    """The changes ``values`` asks for, validated; nothing is modified.

    Args:
        optimizers: the run's optimizers.
        schedulers: the run's LR schedulers.
        values: ``{"lr": 1e-4, "betas": [0.9, 0.99], ...}`` (``None`` values are ignored).
        group: the param group to change; ``None`` changes every group.
        optimizer: which optimizer (index into ``optimizers``).

    Raises:
        ConfigurationError: the optimizer or group does not exist, the optimizer has no such
            hyperparameter, a scheduler could not keep the change, a value does not fit the
            parameters' dtype, or the optimizer's step fails with it (tried on a copy).

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> plan_changes([opt], [], {"lr": 0.01})[0].new
        0.01
    """
    if not 0 <= optimizer < len(optimizers):
        raise ConfigurationError(
            f"optimizer {optimizer} does not exist; the run has {len(optimizers)} optimizer(s)"
        )
    opt = optimizers[optimizer]
    count = len(opt.param_groups)
    if group is not None and not 0 <= group < count:
        raise ConfigurationError(
            f"param group {group} does not exist; {type(opt).__name__} has {count} group(s) "
            f"(0-{count - 1})"
        )
    indices = range(count) if group is None else [group]
    mine = [s for s in _flat(schedulers) if getattr(s, "optimizer", None) is opt]
    changes = []
    for name, new in values.items():
        if new is None:
            continue
        for index in indices:
            changes.append(_planned(opt, optimizer, index, name, new, mine))
    for index in sorted({change.group for change in changes}):
        trial(opt, index, {c.name: c.new for c in changes if c.group == index})
    return changes


def apply_changes(
    optimizers: Sequence[torch.optim.Optimizer], schedulers: Sequence[Any], changes: list[Change]
) -> None:
    """Write planned changes into the param groups and keep the schedulers consistent."""
    for change in changes:
        opt = optimizers[change.optimizer]
        group = opt.param_groups[change.group]
        if change.name == "lr":
            assert isinstance(change.old, float) and isinstance(change.new, float)
            ratio = change.new / change.old if change.old else 1.0
            mine = [s for s in _flat(schedulers) if getattr(s, "optimizer", None) is opt]
            for scheduler in mine:
                _rescale(scheduler, group, change.group, ratio, change.new)
            one_cycle = any(isinstance(s, lr_scheduler.OneCycleLR) for s in mine)
            if mine and "initial_lr" in group and not one_cycle:
                group["initial_lr"] *= ratio  # what a scheduler built later starts from
        _write(group, change.name, change.new)


def _planned(
    opt: torch.optim.Optimizer, index: int, group: int, name: str, new: Any, schedulers: list[Any]
) -> Change:
    params = opt.param_groups[group]
    if name not in params:
        keys = ", ".join(k for k in params if k in HPARAMS)
        raise ConfigurationError(
            f"{type(opt).__name__} has no {name!r} in its param groups; it has {keys}"
        )
    old = _read(params[name])
    if old is None:
        raise ConfigurationError(
            f"{type(opt).__name__} keeps {name}=None in param group {group}, so it does not use "
            f"it; expected a hyperparameter the optimizer uses"
        )
    check_hparam(name, new, floating_dtypes(params["params"]))
    if name == "lr":
        if schedulers and not old:
            raise ConfigurationError(
                f"the lr of param group {group} is 0, so its scheduler cannot be rescaled to a "
                "new value; expected a group with a non-zero lr"
            )
        for scheduler in schedulers:
            _check_lr_scheduler(scheduler)
    if name in ("momentum", "betas"):
        cycling = [s for s in schedulers if getattr(s, "cycle_momentum", False)]
        if cycling:
            raise ConfigurationError(
                f"{type(cycling[0]).__name__} cycles {name} itself and would overwrite it at the "
                "next step; expected a scheduler with cycle_momentum=False"
            )
    if name == "momentum" and new == 0 and params.get("nesterov"):
        raise ConfigurationError("Nesterov momentum needs momentum > 0; expected a positive value")
    value = [float(v) for v in new] if name == "betas" else float(new)
    return Change(index, group, name, old, value)


def _flat(schedulers: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for scheduler in schedulers:
        out.append(scheduler)
        out += _flat(getattr(scheduler, "_schedulers", []))
    return out


def _check_lr_scheduler(scheduler: Any) -> None:
    known = (
        lr_scheduler.ReduceLROnPlateau,
        lr_scheduler.SequentialLR,
        lr_scheduler.ChainedScheduler,
    )
    if isinstance(scheduler, known) or hasattr(scheduler, "base_lrs"):
        return
    raise ConfigurationError(
        f"{type(scheduler).__name__} keeps no base_lrs, so a new lr cannot be kept from being "
        "overwritten; change the lr through the scheduler instead"
    )


def _rescale(scheduler: Any, group: dict[str, Any], index: int, ratio: float, new: float) -> None:
    if isinstance(scheduler, lr_scheduler.OneCycleLR):
        for key in ("initial_lr", "max_lr", "min_lr"):
            group[key] *= ratio
    elif isinstance(scheduler, lr_scheduler.ReduceLROnPlateau):
        pass  # it multiplies the current lr, so it follows by itself
    elif hasattr(scheduler, "base_lrs") and not isinstance(
        scheduler, (lr_scheduler.SequentialLR, lr_scheduler.ChainedScheduler)
    ):
        scheduler.base_lrs[index] *= ratio
        if isinstance(scheduler, lr_scheduler.CyclicLR):
            scheduler.max_lrs[index] *= ratio
    last = getattr(scheduler, "_last_lr", None)
    if isinstance(last, list) and index < len(last):
        last[index] = new


def _read(value: Any) -> Value | None:
    if isinstance(value, torch.Tensor):
        return float(value)
    if isinstance(value, (tuple, list)):
        return [float(v) for v in value]
    return None if value is None else float(value)


def _write(group: dict[str, Any], name: str, new: Value) -> None:
    current = group[name]
    if isinstance(current, torch.Tensor):  # capturable / fused optimizers keep a tensor lr
        current.fill_(float(new))  # type: ignore[arg-type]
    elif name == "betas":
        group[name] = tuple(new)  # type: ignore[arg-type]
    else:
        group[name] = new
