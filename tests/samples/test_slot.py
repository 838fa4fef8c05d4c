"""The slot armed for a training batch keeps its per-sample values; the loss tap reports to it."""

from __future__ import annotations

import copy
import io
import pickle
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


def test_a_tapped_module_calls_its_class_s_forward_as_patched_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A profiler or an instrumentation library may patch the class after an earlier fit
    # tapped one of its modules: the tapped module calls what the class has now.
    class Scaled(nn.MSELoss):
        pass

    LossTap(Scaled()).remove()  # an earlier fit made the tapped class
    seen: list[str] = []
    original = Scaled.forward

    def patched(self: nn.Module, preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        seen.append(self.reduction)  # "none": the slot's own call for per-sample values
        return original(self, preds, target)

    monkeypatch.setattr(Scaled, "forward", patched)
    loss_fn = Scaled()
    tap = LossTap(loss_fn)
    slot = Slot(3)
    arm(slot)
    try:
        loss_fn(torch.ones(3, requires_grad=True), torch.zeros(3))
    finally:
        arm(None)
        tap.remove()
    assert seen[0] == "mean"
    assert slot.values is not None


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


def test_a_tapped_loss_module_pickles_and_copies_as_its_own_class() -> None:
    # torch.save(model) and copy.deepcopy during fit: the copy is the user's class, untapped.
    model = nn.Sequential(nn.Linear(3, CLASSES))
    model.criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    tap = LossTap(model.criterion)
    slot = Slot(4)
    arm(slot)
    try:
        assert tap.active and isinstance(model.criterion, nn.CrossEntropyLoss)
        assert type(model.criterion).__name__ == "CrossEntropyLoss"
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        copied = copy.deepcopy(model)
        old_protocol = pickle.loads(pickle.dumps(model, protocol=1))
        for other in (loaded.criterion, copied.criterion, old_protocol.criterion):
            assert type(other) is nn.CrossEntropyLoss and other.label_smoothing == 0.1
        preds = torch.randn(4, CLASSES, requires_grad=True)
        target = torch.tensor([0, 1, 2, 3])
        copied.criterion(preds, target)  # an untapped copy reports nothing
        assert slot.values is None
        model.criterion(preds, target)
        assert slot.values is not None
    finally:
        arm(None)
        tap.remove()
    assert type(model.criterion) is nn.CrossEntropyLoss
    tap.remove()  # twice: nothing happens


def test_a_loss_module_whose_class_cannot_change_is_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A class of another layout: the switch raises TypeError, as it would for a module whose
    # instances cannot change class.
    other_layout = type("OtherLayout", (nn.Module,), {"__slots__": ("extra",)})
    monkeypatch.setattr(slot_module, "_tapped_class", lambda cls: other_layout)
    module = nn.MSELoss()
    tap = LossTap(module)
    assert not tap.active and type(module) is nn.MSELoss
    assert "cannot observe the calls" in caplog.text
    tap.remove()
    assert type(module) is nn.MSELoss
