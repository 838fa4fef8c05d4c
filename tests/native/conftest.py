"""Tiny models and data shared by the native loop's tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from lightning.pytorch import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def make_dataset(n: int = 40, seed: int = 0) -> TensorDataset:
    """A separable 2-class problem with 4 features."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return TensorDataset(x, (x.sum(1) > 0).long())


def make_model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))


def loader(n: int = 40, batch_size: int = 8, shuffle: bool = False, seed: int = 0) -> DataLoader:
    return DataLoader(make_dataset(n, seed), batch_size=batch_size, shuffle=shuffle)


class Recorder(Callback):
    """Records every hook called on it as (name, key argument) pairs."""

    def __init__(self, hooks: list[str]) -> None:
        super().__init__()
        self.calls: list[tuple[Any, ...]] = []
        for name in hooks:
            setattr(self, name, self._recorder(name))

    def _recorder(self, name: str) -> Callable[..., None]:
        def record(trainer: Any, pl_module: Any, *args: Any, **kwargs: Any) -> None:
            self.calls.append((name, *_key_args(name, args, kwargs)))

        return record


def _key_args(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    if name in ("setup", "teardown"):
        return (kwargs.get("stage", args[0] if args else None),)
    if name.endswith("_batch_start"):
        return (args[1],)
    if name.endswith("_batch_end"):
        return (args[2],)
    if name == "on_exception":
        return (type(args[0]).__name__,)
    return ()


@pytest.fixture
def fit_kwargs() -> dict[str, Any]:
    model = make_model()
    return {
        "model": model,
        "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
        "loss_fn": nn.CrossEntropyLoss(),
        "train_loader": loader(),
        "val_loader": loader(16, seed=1),
        "test_loader": loader(12, batch_size=5, seed=2),
    }
