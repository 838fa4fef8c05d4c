"""The step guard: a failing step after an edit is caught once, everything else passes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from onthefly.callbacks._step_guard import StepGuard


class Flaky(torch.optim.SGD):
    """Raises on its step while ``fail`` is set (a step that overflows, say)."""

    fail = False

    def step(self, closure: Any = None) -> Any:
        if closure is not None:
            closure()
        if self.fail:
            raise RuntimeError("value cannot be converted to type float without overflow")
        return super().step()


def setup() -> tuple[torch.nn.Parameter, Flaky, list[Exception]]:
    param = torch.nn.Parameter(torch.ones(2))
    param.grad = torch.ones(2)
    return param, Flaky([param], lr=0.5), []


def test_a_failing_step_is_reported_once_skipped_and_the_guard_removed() -> None:
    param, optimizer, failures = setup()
    guard = StepGuard(optimizer, failures.append)
    guard.arm()
    optimizer.fail = True
    assert optimizer.step() is None  # no exception: the update is skipped
    assert [str(e) for e in failures] == [
        "value cannot be converted to type float without overflow"
    ]
    assert torch.equal(param.detach(), torch.ones(2))
    assert "step" not in vars(optimizer) and not guard.armed
    with pytest.raises(RuntimeError):  # disarmed: later failures are the run's own
        optimizer.step()


def test_a_step_that_succeeds_disarms_it() -> None:
    param, optimizer, failures = setup()
    guard = StepGuard(optimizer, failures.append)
    guard.arm()
    optimizer.step()
    assert not guard.armed and failures == []
    assert torch.equal(param.detach(), torch.full((2,), 0.5))


def test_an_error_of_the_closure_is_raised_unchanged() -> None:
    _, optimizer, failures = setup()
    guard = StepGuard(optimizer, failures.append)
    guard.arm()

    def closure() -> torch.Tensor:
        raise ValueError("the training step's own bug")

    with pytest.raises(ValueError, match="own bug"):
        optimizer.step(closure)
    assert failures == []


def test_a_schedulers_own_wrapper_is_kept() -> None:
    param = torch.nn.Parameter(torch.ones(1))
    param.grad = torch.ones(1)
    optimizer = torch.optim.SGD([param], lr=0.1)
    torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)  # wraps optimizer.step itself
    wrapped = vars(optimizer).get("step")
    guard = StepGuard(optimizer, lambda exc: None)
    guard.arm()
    optimizer.step()
    assert vars(optimizer).get("step") is wrapped
    assert optimizer._opt_called  # type: ignore[attr-defined]  # the scheduler saw the step
