"""A scan sees every sample once with the current model and leaves the run as it was."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

from onthefly.samples.loss_spec import LossSpec, describe_loss
from onthefly.samples.scan import Progress, run_scan

N = 37


def _zero_model() -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 1), nn.Dropout(0.5))
    nn.init.zeros_(model[0].weight)
    nn.init.zeros_(model[0].bias)
    return model


def _squares() -> TensorDataset:
    """With a zero model and MSE, sample i's loss is i**2."""
    return TensorDataset(torch.zeros(N, 2), torch.arange(N, dtype=torch.float32).reshape(N, 1))


def _mse() -> LossSpec:
    spec = describe_loss(nn.MSELoss())
    assert spec is not None
    return spec


def test_every_sample_once_even_when_training_drops_the_last_batch() -> None:
    loader = DataLoader(_squares(), batch_size=8, shuffle=True, drop_last=True, num_workers=2)
    progress: list[Progress] = []
    result = run_scan(
        _zero_model(), loader, _mse(), split="train", step=3, epoch=1, on_progress=progress.append
    )
    assert result is not None
    assert result.ids.tolist() == list(range(N))
    np.testing.assert_allclose(result.loss, np.arange(N) ** 2)
    assert progress[-1].done == N and progress[-1].total == N
    assert result.step == 3 and result.embedding is not None and result.embedding.shape == (N, 1)


def test_modes_rngs_and_the_training_loaders_position_are_untouched() -> None:
    model = _zero_model()
    model.train()
    model[1].eval()  # a submodule the user froze in eval mode stays so
    train = DataLoader(
        _squares(),
        batch_size=4,
        shuffle=True,
        num_workers=2,
        persistent_workers=True,
        generator=torch.Generator().manual_seed(0),
    )
    control = DataLoader(
        _squares(), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    expected = [y.flatten().tolist() for _, y in control]
    it = iter(train)
    got = [next(it)[1].flatten().tolist() for _ in range(3)]
    torch.manual_seed(5)
    before = torch.get_rng_state()
    assert run_scan(model, train, _mse(), split="train", step=0, epoch=0) is not None
    assert torch.equal(torch.get_rng_state(), before)
    assert model.training and model[0].training and not model[1].training
    got += [y.flatten().tolist() for _, y in it]
    assert got == expected


def test_a_cancelled_scan_returns_nothing() -> None:
    calls = iter(range(100))
    loader = DataLoader(_squares(), batch_size=4)
    result = run_scan(
        _zero_model(),
        loader,
        _mse(),
        split="val",
        step=0,
        epoch=0,
        cancelled=lambda: next(calls) >= 2,
    )
    assert result is None


def test_class_scores_give_correctness_margin_and_labels() -> None:
    x = torch.tensor([[3.0, 1.0], [0.0, 2.0], [1.0, 1.5]])
    y = torch.tensor([0, 0, 1])
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    result = run_scan(
        nn.Identity(),
        DataLoader(TensorDataset(x, y), batch_size=2),
        spec,
        split="test",
        step=0,
        epoch=0,
    )
    assert result is not None
    assert result.correct.tolist() == [1.0, 0.0, 1.0]
    np.testing.assert_allclose(result.margin, [2.0, -2.0, 0.5])
    assert result.label.tolist() == [0.0, 0.0, 1.0]
    np.testing.assert_allclose(
        result.loss, nn.CrossEntropyLoss(reduction="none")(x, y).numpy(), rtol=1e-6
    )


class Stream(IterableDataset[Any]):
    def __init__(self, keyed: bool) -> None:
        self.keyed = keyed

    def __iter__(self) -> Iterator[Any]:
        for i in range(10):
            item = {"x": torch.zeros(2), "y": torch.tensor([float(i)])}
            if self.keyed:
                item["idx"] = 1000 + i
            yield item


@pytest.mark.parametrize("keyed", [True, False])
def test_iterable_data_is_identified_by_its_key_or_by_arrival(keyed: bool) -> None:
    result = run_scan(
        _zero_model(), DataLoader(Stream(keyed), batch_size=3), _mse(), split="val", step=0, epoch=0
    )
    assert result is not None
    offset = 1000 if keyed else 0
    assert result.ids.tolist() == [offset + i for i in range(10)]
    np.testing.assert_allclose(result.loss, np.arange(10) ** 2)


def test_an_embedding_hook_is_called_with_the_model_and_batch() -> None:
    def embed(model: nn.Module, batch: Any) -> torch.Tensor:
        y = batch[1]
        return torch.cat([y, y], dim=1)

    result = run_scan(
        _zero_model(),
        DataLoader(_squares(), batch_size=10),
        _mse(),
        split="val",
        step=0,
        epoch=0,
        embedding_fn=embed,
    )
    assert result is not None and result.embedding is not None
    assert result.embedding.shape == (N, 2) and result.embedding[5].tolist() == [5.0, 5.0]
    with pytest.raises(ValueError, match="expected a Tensor"):
        run_scan(
            _zero_model(),
            DataLoader(_squares(), batch_size=10),
            _mse(),
            split="val",
            step=0,
            epoch=0,
            embedding_fn=lambda m, b: torch.zeros(3),
        )
