"""What the fork commands take from a run, and the runs they refuse."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from onthefly.forks.run import Refused, check_paused, run_parts


@dataclass
class _Trainer:
    """A stand-in for the native trainer's surface the fork commands read."""

    model: nn.Module
    optimizers: list[torch.optim.Optimizer]
    world_size: int = 1
    loss_fn: Any = field(default_factory=nn.CrossEntropyLoss)
    train_loader: Any = None
    val_loader: Any = None

    @property
    def lightning_module(self) -> nn.Module:
        return self.model


def _trainer(**changes: Any) -> _Trainer:
    model = nn.Linear(2, 2)
    data = TensorDataset(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long))
    fields: dict[str, Any] = {
        "model": model,
        "optimizers": [torch.optim.SGD(model.parameters(), lr=0.1)],
        "train_loader": DataLoader(data),
        **changes,
    }
    return _Trainer(**fields)


def test_the_parts_of_a_native_run() -> None:
    trainer = _trainer()
    parts = run_parts(trainer, None)
    assert parts.model is trainer.model and parts.optimizer is trainer.optimizers[0]
    assert parts.train is trainer.train_loader and parts.train_size == 4
    assert parts.spec is not None and parts.spec.class_index and parts.val is None


class _DistributedLightning(pl.Trainer):
    """A Lightning trainer of 2 ranks, as far as the refusal looks."""

    def __init__(self) -> None:
        pass

    @property
    def world_size(self) -> int:
        return 2


def test_a_distributed_native_run_forks_on_rank_0s_parts() -> None:
    trainer = _trainer(world_size=2)
    parts = run_parts(trainer, None)
    assert parts.model is trainer.model and parts.train_size == 4


def test_distributed_lightning_runs_and_several_optimizers_are_refused() -> None:
    with pytest.raises(Refused, match="not supported in distributed Lightning runs") as refused:
        run_parts(_DistributedLightning(), None)
    assert refused.value.code == "unsupported"
    assert "onthefly.Trainer under torchrun" in str(refused.value)
    with pytest.raises(Refused, match="exactly one optimizer; this one has 0"):
        run_parts(_trainer(optimizers=[]), None)


def test_a_run_without_a_loss_reduction_has_no_evaluator() -> None:
    parts = run_parts(_trainer(loss_fn=lambda p, t: (p - t).abs().mean()), None)
    assert parts.spec is None and parts.evaluator([], lambda: False) is None


def test_forks_need_a_paused_run() -> None:
    check_paused("paused", "a fork")
    with pytest.raises(Refused, match="a fork needs a paused run \\(it is running\\)") as refused:
        check_paused("running", "a fork")
    assert refused.value.code == "invalid_state"
