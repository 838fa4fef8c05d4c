"""torchmetrics per stage."""

from __future__ import annotations

import torch
import torchmetrics

from onthefly.native.metrics import StageMetrics


def test_stages_have_independent_states_and_compute_resets() -> None:
    metrics = StageMetrics({"acc": torchmetrics.Accuracy(task="binary")}, torch.device("cpu"))
    metrics.by_stage["train"]["acc"].update(torch.tensor([1, 1]), torch.tensor([1, 1]))
    metrics.by_stage["validation"]["acc"].update(torch.tensor([1, 0]), torch.tensor([0, 1]))
    assert float(metrics.compute("validation")["acc"]) == 0.0
    assert float(metrics.compute("train")["acc"]) == 1.0
    assert metrics.compute("train") == {}  # nothing updated since the reset
    assert metrics.compute("test") == {}
