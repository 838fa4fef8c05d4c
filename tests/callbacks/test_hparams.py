"""Planning and applying hyperparameter changes: validation, and schedulers that keep them."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.optim import lr_scheduler

from onthefly.callbacks._hparams import apply_changes, plan_changes
from onthefly.errors import ConfigurationError


def sgd(**kwargs: Any) -> torch.optim.SGD:
    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(1))
    return torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.05}], lr=0.1, **kwargs)


def set_(opt: torch.optim.Optimizer, scheduler: Any, **values: Any) -> None:
    group = values.pop("group", None)
    schedulers = [] if scheduler is None else [scheduler]
    apply_changes([opt], schedulers, plan_changes([opt], schedulers, values, group=group))


def lrs(opt: torch.optim.Optimizer) -> list[float]:
    return [float(g["lr"]) for g in opt.param_groups]


def step(opt: torch.optim.Optimizer, scheduler: Any, n: int = 1) -> None:
    for _ in range(n):
        opt.step()
        scheduler.step()


def test_every_group_or_one_group_changes() -> None:
    opt = sgd(momentum=0.9)
    set_(opt, None, lr=0.01)
    assert lrs(opt) == [0.01, 0.01]
    set_(opt, None, momentum=0.5, weight_decay=1e-4, group=1)
    assert [g["momentum"] for g in opt.param_groups] == [0.9, 0.5]
    assert [g["weight_decay"] for g in opt.param_groups] == [0, 1e-4]


def test_the_plan_reports_old_and_new_values() -> None:
    opt = torch.optim.Adam([nn.Parameter(torch.zeros(1))], lr=1e-3)
    [change] = plan_changes([opt], [], {"betas": (0.8, 0.99)})
    assert (change.name, change.old, change.new) == ("betas", [0.9, 0.999], [0.8, 0.99])
    apply_changes([opt], [], [change])
    assert opt.param_groups[0]["betas"] == (0.8, 0.99)


@pytest.mark.parametrize(
    ("values", "group", "message"),
    [
        ({"lr": 0.1}, 2, "param group 2 does not exist; SGD has 2 group(s) (0-1)"),
        ({"betas": (0.9, 0.99)}, None, "SGD has no 'betas' in its param groups"),
    ],
)
def test_invalid_requests_change_nothing(values: dict[str, Any], group: int, message: str) -> None:
    opt = sgd()
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan_changes([opt], [], values, group=group)
    assert lrs(opt) == [0.1, 0.05]


def test_a_missing_optimizer_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="optimizer 1 does not exist"):
        plan_changes([sgd()], [], {"lr": 0.1}, optimizer=1)


def test_lambda_lr_keeps_the_new_value() -> None:
    opt = sgd()
    scheduler = lr_scheduler.LambdaLR(opt, lambda epoch: 1.0)
    step(opt, scheduler)
    set_(opt, scheduler, lr=0.01, group=0)
    step(opt, scheduler, 3)
    assert lrs(opt) == pytest.approx([0.01, 0.05])


def test_a_decaying_schedule_continues_from_the_new_value() -> None:
    opt = sgd()
    scheduler = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    step(opt, scheduler, 2)  # lr 0.05, 0.025
    set_(opt, scheduler, lr=1.0)
    step(opt, scheduler, 2)
    assert lrs(opt) == pytest.approx([0.5, 0.5])
    assert scheduler._get_closed_form_lr() == pytest.approx([0.5, 0.5])


def test_cosine_and_chained_schedules_follow() -> None:
    opt = sgd()
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    chained = lr_scheduler.ChainedScheduler([cosine, lr_scheduler.ConstantLR(opt, factor=1.0)])
    step(opt, chained, 2)
    before = lrs(opt)
    set_(opt, chained, lr=before[0] * 10, group=0)
    step(opt, chained)
    ratio = lrs(opt)[0] / lrs(opt)[1]
    assert ratio == pytest.approx(10 * before[0] / before[1])


def test_one_cycle_rescales_its_own_bounds_and_refuses_momentum() -> None:
    opt = sgd(momentum=0.9)
    scheduler = lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    step(opt, scheduler, 3)
    old = lrs(opt)[0]
    set_(opt, scheduler, lr=old / 2)
    step(opt, scheduler)
    twin = sgd(momentum=0.9)
    reference = lr_scheduler.OneCycleLR(twin, max_lr=0.5, total_steps=10)
    step(twin, reference, 4)
    assert lrs(opt) == pytest.approx(lrs(twin))
    with pytest.raises(ConfigurationError, match="OneCycleLR cycles momentum itself"):
        plan_changes([opt], [scheduler], {"momentum": 0.5})


def test_plateau_follows_and_zero_lr_under_a_scheduler_is_refused() -> None:
    opt = sgd()
    plateau = lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.5)
    set_(opt, plateau, lr=0.2)
    plateau.step(1.0)
    plateau.step(2.0)
    assert lrs(opt) == pytest.approx([0.1, 0.1])
    zero = sgd()
    zero.param_groups[0]["lr"] = 0.0
    with pytest.raises(ConfigurationError, match="lr of param group 0 is 0"):
        plan_changes([zero], [lr_scheduler.LambdaLR(zero, lambda e: 1.0)], {"lr": 0.1})


def test_an_unknown_scheduler_is_refused() -> None:
    class Custom:
        def __init__(self, optimizer: torch.optim.Optimizer) -> None:
            self.optimizer = optimizer

    opt = sgd()
    with pytest.raises(ConfigurationError, match="Custom keeps no base_lrs"):
        plan_changes([opt], [Custom(opt)], {"lr": 0.1})
