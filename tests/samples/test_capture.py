"""Per-sample losses from the loss call: each equals the user's loss on that sample alone."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.samples.capture import backward_values, host_values, per_sample, training_values
from onthefly.samples.loss_spec import describe_loss


def _alone(
    loss_fn: Callable[..., torch.Tensor], preds: torch.Tensor, target: torch.Tensor, i: int
) -> float:
    return float(loss_fn(preds[i : i + 1], target[i : i + 1]))


CLASSES = 5
WEIGHT = torch.tensor([0.5, 1.0, 2.0, 3.0, 0.25])


def _tokens(b: int = 6, t: int = 7, ignore: int = -100) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    preds = torch.randn(b, CLASSES, t, generator=g)
    target = torch.randint(0, CLASSES, (b, t), generator=g)
    target[:, ::3] = ignore
    return preds, target


@pytest.mark.parametrize(
    "loss_fn",
    [
        nn.CrossEntropyLoss(),
        nn.CrossEntropyLoss(weight=WEIGHT),
        nn.CrossEntropyLoss(weight=WEIGHT, reduction="sum"),
        nn.CrossEntropyLoss(ignore_index=2, label_smoothing=0.1),
        functools.partial(F.cross_entropy, weight=WEIGHT),
        F.cross_entropy,
        nn.NLLLoss(weight=WEIGHT),
    ],
)
def test_token_losses_equal_the_loss_of_each_sample_alone(loss_fn: Any) -> None:
    preds, target = _tokens()
    if isinstance(loss_fn, nn.NLLLoss):
        preds = preds.log_softmax(1)
    ignore = getattr(loss_fn, "ignore_index", -100)
    target[target == -100] = ignore
    spec = describe_loss(loss_fn)
    assert spec is not None
    values = per_sample(spec, preds, target, len(preds))
    assert values is not None
    expected = torch.tensor([_alone(loss_fn, preds, target, i) for i in range(len(preds))])
    torch.testing.assert_close(values.loss, expected)
    valid = target != ignore
    right = (preds.argmax(1) == target) & valid
    torch.testing.assert_close(values.correct, right.sum(1) / valid.sum(1))


def test_flattened_tokens_fold_back_to_samples() -> None:
    preds, target = _tokens()
    flat_preds = preds.permute(0, 2, 1).reshape(-1, CLASSES)
    loss_fn = nn.CrossEntropyLoss(weight=WEIGHT)
    spec = describe_loss(loss_fn)
    assert spec is not None
    values = per_sample(spec, flat_preds, target.reshape(-1), len(preds))
    assert values is not None
    expected = torch.tensor([_alone(loss_fn, preds, target, i) for i in range(len(preds))])
    torch.testing.assert_close(values.loss, expected)


def test_a_sample_whose_targets_are_all_ignored_is_nan() -> None:
    preds, target = _tokens()
    target[1] = -100
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    values = per_sample(spec, preds, target, len(preds))
    assert values is not None
    assert torch.isnan(values.loss[1]) and torch.isfinite(values.loss[0])


@pytest.mark.parametrize(
    "loss_fn", [nn.MSELoss(), nn.MSELoss(reduction="sum"), nn.L1Loss(), F.smooth_l1_loss]
)
def test_regression_losses_reduce_over_non_batch_dims_like_the_user(loss_fn: Any) -> None:
    preds, target = torch.randn(4, 3, 2), torch.randn(4, 3, 2)
    spec = describe_loss(loss_fn)
    assert spec is not None
    values = per_sample(spec, preds, target, 4)
    assert values is not None
    expected = torch.tensor([_alone(loss_fn, preds, target, i) for i in range(4)])
    torch.testing.assert_close(values.loss, expected)
    assert values.correct is None


def test_one_class_per_sample_leaves_ignored_targets_and_correctness_to_the_host() -> None:
    preds = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0], [1.0, 0.0]])
    target = torch.tensor([0, 0, 1, -100])
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    values = per_sample(spec, preds, target, 4)
    assert values is not None and values.label is not None and values.predicted is not None
    assert values.label.tolist() == [0, 0, 1, -100] and values.ignore == -100
    loss = values.loss.numpy().copy()
    correct = host_values(loss, values.label.double().numpy(), values.predicted.numpy(), -100)
    assert correct.tolist()[:3] == [1.0, 0.0, 0.0] and np.isnan(correct[3]) and np.isnan(loss[3])
    assert np.isfinite(loss[:3]).all()


def test_losses_without_a_reduction_option_are_not_described() -> None:
    assert describe_loss(lambda preds, target: (preds - target).mean()) is None
    assert describe_loss(nn.Linear(2, 2)) is None
    assert describe_loss(3) is None


def test_a_loss_that_is_not_per_sample_gives_nothing() -> None:
    spec = describe_loss(nn.MSELoss())
    assert spec is not None
    assert per_sample(spec, torch.randn(5), torch.randn(5), 2) is None


def _batch(n: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(n)
    scores = torch.randn(n, CLASSES, generator=g, dtype=dtype).requires_grad_()
    return scores, torch.randint(0, CLASSES, (n,), generator=g)


@pytest.mark.parametrize(
    "loss_fn",
    [
        nn.CrossEntropyLoss(),
        nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=2),
        nn.NLLLoss(),
        F.cross_entropy,
        functools.partial(F.cross_entropy, label_smoothing=0.2),
    ],
    ids=["module", "smoothed-ignoring", "nll", "functional", "partial"],
)
def test_an_unweighted_class_loss_is_left_to_the_copy_with_the_same_values(loss_fn: Any) -> None:
    spec = describe_loss(loss_fn)
    assert spec is not None
    scores, target = _batch(9)
    values = training_values(spec, scores, target, 9)
    assert values is not None and values.loss is None  # no kernel in the training step
    assert torch.equal(values.loss_now(), spec.unreduced(scores.detach(), target))


def test_weights_half_precision_and_large_scores_keep_the_loss_in_the_step() -> None:
    scores, target = _batch(4)
    weighted = describe_loss(nn.CrossEntropyLoss(weight=WEIGHT))
    plain = describe_loss(nn.CrossEntropyLoss())
    assert weighted is not None and plain is not None
    values = training_values(weighted, scores, target, 4)
    assert values is not None and values.loss is not None
    half = scores.detach().bfloat16().requires_grad_()  # as an autocast forward gives them
    with torch.autocast("cpu", dtype=torch.bfloat16):
        values = training_values(plain, half, target, 4)
    assert values is not None and values.loss is not None
    wide = torch.randn(2, 40_000, requires_grad=True)  # more scores than are kept
    values = per_sample(plain, wide, torch.tensor([0, 1]), 2, correctness=False, scores=True)
    assert values is not None and values.loss is not None


def test_single_precision_scores_under_autocast_are_left_with_the_autocast_values() -> None:
    # Autocast converts only half-precision inputs of a cross-entropy: on single precision
    # scores the later call computes what the step would have computed.
    plain = describe_loss(nn.CrossEntropyLoss(label_smoothing=0.05))
    assert plain is not None
    scores, target = _batch(8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        values = training_values(plain, scores, target, 8)
        in_step = plain.unreduced(scores.detach(), target)
    assert values is not None and values.loss is None
    assert torch.equal(values.loss_now(), in_step)


def test_a_loss_module_changed_between_steps_is_left_with_its_options_of_each_step() -> None:
    loss_fn = nn.CrossEntropyLoss()
    spec = describe_loss(loss_fn)
    assert spec is not None
    scores, target = _batch(6)
    kept = []
    for smoothing, ignore in [(0.0, -100), (0.0, -100), (0.2, -100), (0.2, 3)]:
        loss_fn.label_smoothing, loss_fn.ignore_index = smoothing, ignore
        values = training_values(spec, scores, target, 6)
        assert values is not None and values.loss is None
        expected = F.cross_entropy(
            scores.detach(),
            target,
            ignore_index=ignore,
            label_smoothing=smoothing,
            reduction="none",
        )
        kept.append((values, expected))
    loss_fn.label_smoothing, loss_fn.ignore_index = 0.5, 1  # after the steps: changes nothing
    for values, expected in kept:
        assert torch.equal(values.loss_now(), expected)
    loss_fn.weight = WEIGHT  # class weights: the loss is computed in the step again
    values = training_values(spec, scores, target, 6)
    assert values is not None and values.loss is not None


@pytest.mark.parametrize(
    "loss_of",
    [
        lambda s, y: F.cross_entropy(s, y),
        lambda s, y: F.cross_entropy(s, y, ignore_index=2, reduction="sum"),
        lambda s, y: F.nll_loss(F.log_softmax(s, 1), y) / 4,  # accumulated gradients
        lambda s, y: F.cross_entropy(s, y) + 0.1 * s.square().mean(),  # a regulariser
    ],
)
def test_the_loss_backpropagated_gives_the_values_of_its_cross_entropy_call(
    loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> None:
    g = torch.Generator().manual_seed(5)
    scores = torch.randn(16, 4, generator=g, requires_grad=True)
    target = torch.randint(0, 4, (16,), generator=g)
    loss = loss_of(scores, target)
    found = backward_values(loss, 16)
    assert found is not None and found.label is target
    ignore = found.ignore
    expected = F.cross_entropy(scores, target, reduction="none", ignore_index=ignore)
    torch.testing.assert_close(found.loss_now(), expected.detach(), rtol=0, atol=0)


def test_no_values_come_from_a_loss_without_an_unweighted_class_index_nll() -> None:
    g = torch.Generator().manual_seed(6)
    scores = torch.randn(16, 4, generator=g, requires_grad=True)
    target = torch.randint(0, 4, (16,), generator=g)
    weighted = F.cross_entropy(scores, target, weight=torch.ones(4))
    tokens = F.cross_entropy(scores.view(4, 4, 4), target.view(4, 4))  # [B, C, T] scores
    assert backward_values(weighted, 16) is None
    assert backward_values(tokens, 4) is None
    assert backward_values(F.mse_loss(scores, torch.zeros(16, 4)), 16) is None
    assert backward_values(F.cross_entropy(scores, target), 8) is None  # not this batch's size
    assert backward_values(torch.tensor(1.0), 16) is None  # no graph
