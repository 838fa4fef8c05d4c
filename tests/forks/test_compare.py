"""Side-by-side evaluation on target slices: the targets, the scores, the table."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from onthefly.forks.compare import Evaluator, Target, targets
from onthefly.samples.loss_spec import describe_loss


def test_targets_are_the_slices_the_rest_and_validation() -> None:
    found = targets({"a": [1, 2], "b": [2, 7]}, train_size=10, has_val=True, rest_max=100)
    assert [(t.name, t.kind, t.split) for t in found] == [
        ("a", "slice", "train"),
        ("b", "slice", "train"),
        ("rest", "rest", "train"),
        ("val", "val", "val"),
    ]
    assert found[2].indices is not None and found[2].indices.tolist() == [0, 3, 4, 5, 6, 8, 9]
    assert found[3].indices is None
    sampled = targets({"a": [0]}, train_size=1000, has_val=False, rest_max=50)
    rest = sampled[1].indices
    assert rest is not None and len(rest) == 50 and 0 not in rest
    again = targets({"b": [0]}, train_size=1000, has_val=False, rest_max=50)[1].indices
    assert np.array_equal(rest, again)  # the same sample for every comparison


def _classes() -> tuple[DataLoader, DataLoader, nn.Module]:
    torch.manual_seed(0)
    x, y = torch.randn(30, 4), torch.randint(0, 3, (30,))
    train = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    val = DataLoader(TensorDataset(x[:12], y[:12]), batch_size=5)
    return train, val, nn.Linear(4, 3)


def test_scores_are_mean_losses_and_accuracies_per_target() -> None:
    train, val, model = _classes()
    found = targets({"s": [3, 1, 4]}, 30, has_val=True, rest_max=10)
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    evaluator = Evaluator(found, train, val, spec)
    scores = evaluator.scores(model)
    assert scores is not None
    x, y = train.dataset.tensors  # type: ignore[attr-defined]
    with torch.no_grad():
        for target in found:
            ids = slice(0, 12) if target.indices is None else target.indices
            logits = model(x[ids])
            expected = F.cross_entropy(logits, y[ids]).item()
            accuracy = (logits.argmax(1) == y[ids]).float().mean().item()
            score = scores[target.name]
            assert score.loss == pytest.approx(expected, rel=1e-5), target.name
            assert score.accuracy == pytest.approx(accuracy), target.name
            assert score.samples == len(y[ids])
    table = evaluator.table([scores, scores])
    assert [t["samples"] for t in table["targets"]] == [3, 10, 12]
    assert table["rows"][0]["loss"] == [scores[t.name].loss for t in found]


def test_regression_targets_have_no_accuracy_and_cancel_stops_the_pass() -> None:
    data = TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    spec = describe_loss(nn.MSELoss())
    assert spec is not None
    found = [Target("s", "slice", "train", np.array([0, 5]))]
    model = nn.Linear(2, 1)
    scores = Evaluator(found, DataLoader(data, batch_size=3), None, spec).scores(model)
    assert scores is not None and scores["s"].accuracy is None
    x, y = data.tensors
    with torch.no_grad():
        expected = F.mse_loss(model(x[[0, 5]]), y[[0, 5]]).item()
    assert scores["s"].loss == pytest.approx(expected, rel=1e-5)
    cancelled = Evaluator(found, DataLoader(data), None, spec, cancelled=lambda: True)
    assert cancelled.scores(model) is None
