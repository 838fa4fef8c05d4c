"""The loss mode reports a training step's functional loss calls and changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.samples.loss_mode import LossMode
from onthefly.samples.slot import Slot, arm

B, C = 6, 4
g = torch.Generator().manual_seed(0)
SCORES = torch.randn(B, C, generator=g)
CLASSES = torch.randint(0, C, (B,), generator=g)
REAL = torch.randn(B, C, generator=g)
PROBS = torch.rand(B, C, generator=g)
WEIGHT = torch.tensor([0.5, 1.0, 2.0, 3.0])

Call = Callable[[torch.Tensor], torch.Tensor]
CASES: dict[str, tuple[Call, Callable[[torch.Tensor], torch.Tensor]]] = {
    # name: (the user's call on the scores, each sample's loss alone)
    "cross_entropy": (
        lambda s: F.cross_entropy(s, CLASSES),
        lambda s: F.cross_entropy(s, CLASSES, reduction="none"),
    ),
    "weighted_cross_entropy": (
        lambda s: F.cross_entropy(s, CLASSES, weight=WEIGHT),
        lambda s: F.cross_entropy(s, CLASSES, weight=WEIGHT, reduction="none") / WEIGHT[CLASSES],
    ),
    "cross_entropy_module": (
        lambda s: nn.CrossEntropyLoss(label_smoothing=0.1)(s, CLASSES),
        lambda s: F.cross_entropy(s, CLASSES, label_smoothing=0.1, reduction="none"),
    ),
    "nll_loss": (
        lambda s: F.nll_loss(F.log_softmax(s, 1), CLASSES),
        lambda s: F.nll_loss(F.log_softmax(s, 1), CLASSES, reduction="none"),
    ),
    "bce_with_logits": (
        lambda s: F.binary_cross_entropy_with_logits(s, PROBS),
        lambda s: F.binary_cross_entropy_with_logits(s, PROBS, reduction="none").mean(1),
    ),
    "bce": (
        lambda s: F.binary_cross_entropy(torch.sigmoid(s), PROBS),
        lambda s: F.binary_cross_entropy(torch.sigmoid(s), PROBS, reduction="none").mean(1),
    ),
    "mse_sum": (
        lambda s: F.mse_loss(s, REAL, reduction="sum"),
        lambda s: F.mse_loss(s, REAL, reduction="none").sum(1),
    ),
    "l1": (lambda s: F.l1_loss(s, REAL), lambda s: (s - REAL).abs().mean(1)),
    "smooth_l1": (
        lambda s: F.smooth_l1_loss(s, REAL, beta=0.5),
        lambda s: F.smooth_l1_loss(s, REAL, beta=0.5, reduction="none").mean(1),
    ),
    "huber": (
        lambda s: F.huber_loss(s, REAL, delta=0.5),
        lambda s: F.huber_loss(s, REAL, delta=0.5, reduction="none").mean(1),
    ),
    "kl_div_batchmean": (
        lambda s: F.kl_div(F.log_softmax(s, 1), F.softmax(REAL, 1), reduction="batchmean"),
        lambda s: F.kl_div(F.log_softmax(s, 1), F.softmax(REAL, 1), reduction="none").sum(1),
    ),
}


def _run(call: Call, watched: bool) -> tuple[torch.Tensor, torch.Tensor, Slot]:
    scores = SCORES.clone().requires_grad_(True)
    slot, mode = Slot(B), LossMode()
    arm(slot)
    if watched:
        mode.enter()
    try:
        loss = call(scores)
    finally:
        mode.leave()
        arm(None)
    (grad,) = torch.autograd.grad(loss, scores)
    return loss, grad, slot


@pytest.mark.parametrize("name", list(CASES))
def test_each_recognised_loss_gives_each_samples_own_loss_unchanged(name: str) -> None:
    call, alone = CASES[name]
    plain_loss, plain_grad, _ = _run(call, watched=False)
    loss, grad, slot = _run(call, watched=True)
    assert torch.equal(loss, plain_loss) and torch.equal(grad, plain_grad)  # bit for bit
    assert slot.values is not None
    torch.testing.assert_close(slot.values.loss_now().float(), alone(SCORES).float())


def test_only_the_first_call_on_predictions_with_gradients_counts() -> None:
    slot, mode = Slot(B), LossMode()
    arm(slot)
    mode.enter()
    try:
        with torch.no_grad():
            F.mse_loss(SCORES, REAL)  # an evaluation meanwhile
        assert slot.values is None
        scores = SCORES.clone().requires_grad_(True)
        F.mse_loss(scores, REAL, reduction="sum")
        F.mse_loss(scores, torch.zeros_like(REAL))
    finally:
        mode.leave()
        arm(None)
    assert slot.values is not None
    torch.testing.assert_close(slot.values.loss, ((SCORES - REAL) ** 2).sum(1))


def test_the_mode_is_left_only_while_it_is_the_innermost() -> None:
    class Other(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None):
            return func(*args, **(kwargs or {}))

    mode = LossMode()
    mode.enter()
    with Other():
        mode.leave()  # not the innermost: stays
        assert mode.active
    mode.leave()
    assert not mode.active and torch.overrides._get_current_function_mode() is None
