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
from tests.native.handwritten import onthefly_run, plain_run

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


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("generator", [False, True], ids=["global", "own-generator"])
def test_a_hand_written_train_then_validate_script_gives_the_same_numbers(
    generator: bool, workers: int
) -> None:
    # The validation loader's iterator draws its seed, and its noisy data draws noise: the
    # configured validation must draw exactly that, or every later epoch moves.
    expected = plain_run(3, generator, workers)
    got = onthefly_run(3, generator, workers)
    assert (got.train, got.val, got.test) == (expected.train, expected.val, expected.test)
    assert torch.equal(got.rng_after, expected.rng_after)


def test_do_test_after_draws_what_a_final_test_loop_draws() -> None:
    # Evaluation data without random draws: the order of the last validation and the final
    # test does not matter (see docs/hook-order.md), the numbers and the RNG are the same.
    expected = plain_run(3, noisy_eval=False)
    got = onthefly_run(3, noisy_eval=False, session=True)
    assert (got.train, got.val, got.test) == (expected.train, expected.val, expected.test)
    assert torch.equal(got.rng_after, expected.rng_after)
