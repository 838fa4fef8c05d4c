"""The slot armed for a training batch keeps its per-sample values; the loss tap reports to it."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from onthefly.samples.slot import LossTap, Slot, arm, observe

CLASSES = 5
WEIGHT = torch.tensor([0.5, 1.0, 2.0, 3.0, 0.25])


def test_the_tap_changes_neither_the_loss_nor_its_gradient_bit_for_bit() -> None:
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(256, CLASSES, generator=g, requires_grad=True)
    target = torch.randint(0, CLASSES, (256,), generator=g)
    loss_fn = nn.CrossEntropyLoss(weight=WEIGHT)
    plain = loss_fn(logits, target)
    (plain_grad,) = torch.autograd.grad(plain, logits)
    tap = LossTap(loss_fn)
    slot = Slot(256)
    arm(slot)
    try:
        tapped = loss_fn(logits, target)
        (tapped_grad,) = torch.autograd.grad(tapped, logits)
    finally:
        arm(None)
        tap.remove()
    assert torch.equal(plain, tapped) and torch.equal(plain_grad, tapped_grad)
    assert slot.values is not None
    assert "forward" not in vars(loss_fn) and loss_fn.reduction == "mean"


def test_the_slot_keeps_the_first_training_call_and_ignores_evaluation_calls() -> None:
    slot = Slot(2)
    arm(slot)
    try:
        observe(F.mse_loss, torch.ones(2), torch.zeros(2))  # no gradient: an evaluation
        assert slot.values is None
        preds = torch.tensor([1.0, 2.0], requires_grad=True)
        observe(F.mse_loss, preds, torch.zeros(2))
        observe(F.mse_loss, preds, torch.ones(2))
    finally:
        arm(None)
    assert slot.values is not None and slot.values.loss.tolist() == [1.0, 4.0]
    observe(F.mse_loss, preds, torch.zeros(2))  # disarmed: nothing happens
