"""One evaluation epoch."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from lightning.pytorch import Callback
from torch.utils.data import DataLoader

from onthefly.errors import ConfigurationError
from onthefly.native.evaluation import evaluate, loaders_of
from onthefly.native.hooks import Hooks
from onthefly.native.metrics import StageMetrics
from onthefly.native.precision import make_autocast, make_scaler
from onthefly.native.state import StepState
from tests.native.conftest import make_model
from tests.native.handwritten import onthefly_run, plain_run

CPU = torch.device("cpu")


class Host:
    def __init__(self, model: torch.nn.Module) -> None:
        self.model = self.lightning_module = model


def run(
    batches: list[Any], step: Any, *more: list[Any], callbacks: list[Any] | None = None
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Evaluate ``batches`` (and each of ``more``, a loader of its own) as a test."""
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
    hooks = Hooks(Host(model), callbacks or [])
    results = evaluate(
        "test", [batches, *more], step, state, hooks, StageMetrics(None, CPU), callback_metrics
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
    with pytest.raises(ConfigurationError, match=r"loader \(dataloader_idx 1\) yielded no"):
        run([torch.ones(2)], lambda b, s: {"loss": b.mean()}, [])


class Seen(Callback):
    """The test hooks as Lightning would call them: their names and arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def on_test_epoch_start(self, *args: Any) -> None:
        self.calls.append(("epoch_start", ()))

    def on_test_batch_start(self, trainer: Any, module: Any, *args: Any) -> None:
        self.calls.append(("batch_start", args[1:]))  # (batch_idx[, dataloader_idx])

    def on_test_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:
        self.calls.append(("batch_end", args[1:]))

    def on_test_epoch_end(self, *args: Any) -> None:
        self.calls.append(("epoch_end", ()))


def test_several_loaders_are_named_and_hooked_as_lightning_does() -> None:
    seen = Seen()
    loaders: list[int] = []

    def step(batch: torch.Tensor, state: StepState) -> dict[str, torch.Tensor]:
        loaders.append(state.dataloader_idx)
        return {"loss": batch.mean()}

    first, second = [torch.full((2,), 1.0)], [torch.full((1,), 4.0), torch.full((3,), 8.0)]
    results, published = run(first, step, second, callbacks=[seen])
    assert set(results) == {"loss/dataloader_idx_0", "loss/dataloader_idx_1"}
    assert float(results["loss/dataloader_idx_0"]) == pytest.approx(1.0)
    assert float(results["loss/dataloader_idx_1"]) == pytest.approx((4.0 + 3 * 8.0) / 4)
    assert set(published) == {"test_loss/dataloader_idx_0", "test_loss/dataloader_idx_1"}
    assert loaders == [0, 1, 1]
    # The epoch hooks once around every loader; the batch hooks end with dataloader_idx.
    assert seen.calls == [
        ("epoch_start", ()),
        ("batch_start", (0, 0)),
        ("batch_end", (0, 0)),
        ("batch_start", (0, 1)),
        ("batch_end", (0, 1)),
        ("batch_start", (1, 1)),
        ("batch_end", (1, 1)),
        ("epoch_end", ()),
    ]


def test_one_loader_gets_lightning_s_single_loader_arguments() -> None:
    seen = Seen()
    run([torch.ones(2)], lambda b, s: {"loss": b.mean()}, callbacks=[seen])
    assert ("batch_end", (0,)) in seen.calls  # no dataloader_idx, as Lightning passes none


@pytest.mark.parametrize(
    ("given", "count"),
    [
        (None, 0),
        (DataLoader([1, 2]), 1),
        ([DataLoader([1]), DataLoader([2])], 2),
        ((DataLoader([1]), DataLoader([2]), DataLoader([3])), 3),
        ({"a": DataLoader([1]), "b": DataLoader([2])}, 2),
        ([(torch.ones(1), torch.zeros(1))] * 3, 1),  # a list of batches is one loader
        ([DataLoader([1]), [(1, 2)]], 1),  # not all loaders: one iterable, as given
    ],
)
def test_loaders_of_reads_lists_and_dicts_of_dataloaders_as_lightning_does(
    given: Any, count: int
) -> None:
    assert len(loaders_of(given)) == count


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
