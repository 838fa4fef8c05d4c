"""The activations check: dead ReLU units, saturated sigmoids, hooks removed afterwards."""

from __future__ import annotations

import torch
from torch import nn

from onthefly.health import check_activations, problems
from tests.health.models import dead, healthy, probe_of


def test_a_healthy_relu_layer_has_no_problem() -> None:
    model = healthy()
    findings = check_activations(probe_of(model))
    assert problems(findings) == []
    assert findings[-1].details["layers"][0]["layer"] == "1"
    assert all(not m._forward_hooks for m in model.modules())


def test_a_relu_after_a_huge_negative_bias_is_dead() -> None:
    findings = problems(check_activations(probe_of(dead())))
    assert len(findings) == 1
    assert findings[0].details == {"layer": "1", "kind": "dead", "fraction": 1.0}
    assert "100% of the units of 1 are dead" in findings[0].summary


def test_a_saturated_sigmoid_is_a_warning() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.Sigmoid(), nn.Linear(4, 2))
    with torch.no_grad():
        model[0].weight.mul_(500.0)
    findings = problems(check_activations(probe_of(model)))
    assert [f.details["kind"] for f in findings] == ["saturated"]


def test_a_model_without_activation_modules_says_so() -> None:
    findings = check_activations(probe_of(nn.Linear(8, 2)))
    assert [f.severity for f in findings] == ["info"]
    assert "no activation modules" in findings[0].summary
