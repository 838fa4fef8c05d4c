"""One rank's position in its share of the data."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from onthefly.distributed.cursor import capture


def test_a_cursor_reads_the_trainer_and_its_sampler() -> None:
    data = TensorDataset(torch.zeros(8, 1))
    sampler: DistributedSampler[Any] = DistributedSampler(data, num_replicas=2, rank=1)
    sampler.set_epoch(4)
    trainer = SimpleNamespace(
        global_step=41, current_epoch=4, train_loader=DataLoader(data, sampler=sampler)
    )
    cursor = capture(trainer, rank=1, batches=3, step_time=0.002)
    assert cursor.to_json() == {
        "rank": 1,
        "step": 41,
        "epoch": 4,
        "sampler_epoch": 4,
        "batches": 3,
        "step_time": 0.002,
        "time": cursor.time,
    }
    plain = SimpleNamespace(global_step=0, current_epoch=0, train_loader=[1, 2])
    assert capture(plain, rank=0, batches=0).sampler_epoch is None
