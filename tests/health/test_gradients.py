"""The gradients check: healthy, exploding, vanishing (dead layer) and non-finite gradients."""

from __future__ import annotations

import torch

from onthefly.health import check_gradients, problems
from tests.health.models import dead, exploding, healthy, mse_on_logits, probe_of


def test_a_healthy_model_has_no_problem_and_a_per_layer_table() -> None:
    findings = check_gradients(probe_of(healthy()))
    assert problems(findings) == []
    layers = findings[-1].details["layers"]
    assert [row["parameter"] for row in layers] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(0 < row["update_ratio"] < 0.5 for row in layers)


def test_an_exploding_setup_is_a_warning() -> None:
    model = exploding()
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    findings = problems(check_gradients(probe_of(model, opt, mse_on_logits)))
    assert [f.severity for f in findings] == ["warning"]
    assert "exploding" in findings[0].summary
    assert findings[0].details["worst"]["grad_norm"] > 1e3


def test_a_dead_layer_starves_the_layers_around_it() -> None:
    findings = problems(check_gradients(probe_of(dead())))
    assert len(findings) == 1 and "vanishing" in findings[0].summary
    # Nothing flows back through dead units, and nothing reaches the next layer's weights.
    assert findings[0].details["parameters"] == ["0.weight", "0.bias", "2.weight"]


def test_nan_gradients_are_an_error() -> None:
    model = healthy()
    with torch.no_grad():
        model[2].weight[0, 0] = float("nan")
    findings = problems(check_gradients(probe_of(model)))
    assert [f.severity for f in findings if f.severity == "error"] == ["error", "error"]
    assert "the loss is nan" in findings[0].summary
    assert "first: 0.weight" in findings[1].summary
