"""The slot armed for a training batch keeps its per-sample values; the loss tap reports to it."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import onthefly.samples.slot as slot_module
from onthefly.samples.capture import training_values
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


def test_a_hooked_loss_whose_options_change_between_batches_gives_each_batch_its_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each batch's values are its own samples' losses alone, with the options of its call,
    # also where report() repeats the last batch's way to them without asking the loss again.
    done: list[int] = []  # the batches trained on
    general: list[int] = []  # the batches for which report() asked training_values

    def spied(*args: Any) -> Any:
        general.append(len(done))
        return training_values(*args)

    monkeypatch.setattr(slot_module, "training_values", spied)
    loss_fn = nn.CrossEntropyLoss()
    tap = LossTap(loss_fn)
    g = torch.Generator().manual_seed(3)
    slot = Slot(8)
    arm(slot)
    # (label smoothing, ignore_index, class weights, batch size): report() takes the general
    # way for the first batch and after each change of the loss's options, the repeated way
    # otherwise (a smaller batch included).
    schedule = [
        (0.0, -100, None, 8),
        (0.0, -100, None, 8),
        (0.0, 3, None, 8),
        (0.0, 3, None, 8),
        (0.0, 3, None, 5),
        (0.2, 3, None, 8),
        (0.0, -100, WEIGHT, 8),
        (0.0, -100, None, 8),
        (0.0, -100, None, 8),
    ]
    try:
        for smoothing, ignore, weight, n in schedule:
            loss_fn.label_smoothing, loss_fn.ignore_index = smoothing, ignore
            loss_fn.weight = weight
            preds = torch.randn(n, CLASSES, generator=g, requires_grad=True)
            target = torch.randint(0, CLASSES, (n,), generator=g)
            slot.n, slot.values = n, None
            loss_fn(preds, target).backward()  # what the node saved is released
            values = slot.values
            assert values is not None
            got = values.loss_now()
            for i in range(n):
                if target[i] == ignore:
                    continue
                alone = loss_fn(preds[i : i + 1], target[i : i + 1])
                torch.testing.assert_close(got[i], alone.detach())
            assert values.ignore == ignore
            done.append(n)
    finally:
        arm(None)
        tap.remove()
    assert general == [0, 2, 5, 6, 7]
