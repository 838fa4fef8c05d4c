"""One evaluation epoch."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from onthefly.errors import ConfigurationError
from onthefly.native.evaluation import evaluate
from onthefly.native.hooks import Hooks
from onthefly.native.metrics import StageMetrics
from onthefly.native.precision import make_autocast, make_scaler
from onthefly.native.state import StepState
from tests.native.conftest import make_model

CPU = torch.device("cpu")


class Host:
    def __init__(self, model: torch.nn.Module) -> None:
        self.lightning_module = model


def run(batches: list[Any], step: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    model = make_model()
    state = StepState(
        model=model,
        optimizer=torch.optim.SGD(model.parameters()),
        loss_fn=None,
        device=CPU,
        autocast=make_autocast("32", CPU),
        scaler=make_scaler("32", CPU),
        scheduler=None,
    )
    callback_metrics: dict[str, Any] = {}
    hooks = Hooks(Host(model), [])
    results = evaluate(
        "test", batches, step, state, hooks, StageMetrics(None, CPU), callback_metrics
    )
    assert model.training
    return results, callback_metrics


def test_loss_is_the_mean_over_samples_not_batches() -> None:
    batches = [torch.full((3,), 1.0), torch.full((1,), 5.0)]
    results, published = run(batches, lambda b, s: {"loss": b.mean()})
    assert float(results["loss"]) == pytest.approx((3 * 1.0 + 5.0) / 4)
    assert published["test_loss"] is results["loss"]


def test_an_empty_loader_is_an_error() -> None:
    with pytest.raises(ConfigurationError, match="yielded no batches"):
        run([], lambda b, s: {"loss": b})
