"""The trial step: an edit is tried on a copy of the optimizer's own update, touching nothing."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from onthefly.callbacks._hparam_trial import trial
from onthefly.errors import ConfigurationError


def trained(
    opt_class: type[torch.optim.Optimizer], steps: int, scale: float = 1.0, **options: Any
) -> Any:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = opt_class(model.parameters(), **options)
    for _ in range(steps):
        optimizer.zero_grad()
        (scale * model(torch.randn(8, 4))).square().mean().backward()
        optimizer.step()
    return model, optimizer


def test_an_lr_that_overflows_adams_first_step_is_refused() -> None:
    # Adam divides lr by its bias correction, 0.1 at the first step: 1e38 / 0.1 overflows.
    _, optimizer = trained(torch.optim.Adam, 0, lr=1e-3)
    with pytest.raises(ConfigurationError, match="Adam's next step would fail with lr=1e"):
        trial(optimizer, 0, {"lr": 1e38})
    trial(optimizer, 0, {"lr": 1e-2})


def test_an_edit_that_would_make_the_weights_infinite_is_refused() -> None:
    # Gradients of about 100: an lr near float32's largest sends the weights to infinity.
    _, optimizer = trained(torch.optim.SGD, 3, scale=100.0, lr=1e-6)
    with pytest.raises(ConfigurationError, match="would become infinite or NaN"):
        trial(optimizer, 0, {"lr": 3e38})


def test_the_trial_changes_neither_the_optimizer_nor_the_random_state() -> None:
    model, optimizer = trained(torch.optim.AdamW, 3, lr=1e-3)
    weights = [p.detach().clone() for p in model.parameters()]
    state = {k: {n: v.clone() for n, v in s.items()} for k, s in optimizer.state.items()}
    rng = torch.random.get_rng_state()
    trial(optimizer, 0, {"lr": 1e-2, "weight_decay": 0.5})
    assert all(torch.equal(a, b) for a, b in zip(weights, model.parameters(), strict=True))
    for param, saved in state.items():
        assert all(torch.equal(saved[n], optimizer.state[param][n]) for n in saved)
    assert optimizer.param_groups[0]["lr"] == 1e-3
    assert torch.equal(rng, torch.random.get_rng_state())


class NeedsMore(torch.optim.SGD):
    """An optimizer whose constructor takes more than its param groups hold."""

    def __init__(self, params: Any, ceiling: float, lr: float) -> None:
        super().__init__(params, lr=lr)
        self.ceiling = ceiling


def test_an_optimizer_the_trial_cannot_build_is_left_to_the_guard() -> None:
    model = torch.nn.Linear(2, 1)
    trial(NeedsMore(model.parameters(), ceiling=1.0, lr=0.1), 0, {"lr": 1e30})  # no verdict
