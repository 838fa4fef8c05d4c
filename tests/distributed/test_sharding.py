"""Each rank's share of the training data: a DistributedSampler kept, added, advanced."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    SequentialSampler,
    TensorDataset,
)

import onthefly
from onthefly.distributed.sharding import sampler_epoch, set_sampler_epoch, shard_loader

DATA = TensorDataset(torch.arange(10.0).unsqueeze(1), torch.zeros(10, dtype=torch.long))


def _identity(batch: Any) -> Any:
    return batch


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_plain_loader_gets_a_distributed_sampler_and_keeps_its_settings(shuffle: bool) -> None:
    loader = DataLoader(DATA, batch_size=3, shuffle=shuffle, drop_last=True, collate_fn=_identity)
    shards = [shard_loader(loader, rank, 2) for rank in (0, 1)]
    for rank, shard in enumerate(shards):
        sampler = shard.sampler
        assert isinstance(sampler, DistributedSampler)
        assert (sampler.rank, sampler.num_replicas, sampler.shuffle) == (rank, 2, shuffle)
        assert (shard.batch_size, shard.drop_last, shard.collate_fn) == (3, True, _identity)
    # 5 samples each, one full batch of 3 (drop_last), and no sample on both ranks.
    seen = [[int(x) for batch in shard for x, _ in batch] for shard in shards]
    assert [len(s) for s in seen] == [3, 3] and not set(seen[0]) & set(seen[1])
    if not shuffle:
        assert seen == [[0, 2, 4], [1, 3, 5]]


def test_a_distributed_sampler_is_kept_and_others_are_used_as_given(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sharded = DataLoader(DATA, sampler=DistributedSampler(DATA, num_replicas=2, rank=1))
    assert shard_loader(sharded, 1, 2) is sharded
    assert caplog.text == ""
    batch_sampler = BatchSampler(SequentialSampler(DATA), 2, False)

    class Stream(IterableDataset[int]):
        def __iter__(self) -> Any:
            return iter(range(3))

    kept = [
        DataLoader(DATA, batch_sampler=_Custom(batch_sampler)),
        DataLoader(Stream()),
        [(torch.zeros(1), torch.zeros(1))],
    ]
    for loader in kept:
        assert shard_loader(loader, 0, 2) is loader
    assert caplog.text.count("each rank iterates all of it") == 3
    assert "a custom batch sampler _Custom" in caplog.text


class _Custom(BatchSampler):
    def __init__(self, inner: BatchSampler) -> None:
        super().__init__(inner.sampler, inner.batch_size, inner.drop_last)


def test_set_epoch_reaches_the_sampler_and_is_read_back() -> None:
    sampler: DistributedSampler[Any] = DistributedSampler(
        DATA, num_replicas=2, rank=0, shuffle=True
    )
    loader = DataLoader(DATA, sampler=sampler, batch_size=2)
    assert sampler_epoch(loader) == 0
    set_sampler_epoch(loader, 3)
    assert sampler.epoch == sampler_epoch(loader) == 3
    plain = DataLoader(DATA)
    set_sampler_epoch(plain, 3)  # nothing to set
    assert sampler_epoch(plain) is None


def test_the_native_trainer_sets_the_sampler_epoch_every_epoch() -> None:
    sampler: DistributedSampler[Any] = DistributedSampler(
        DATA, num_replicas=1, rank=0, shuffle=True
    )
    epochs: list[int] = []

    class Watch:
        def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
            epochs.append(sampler.epoch)

    model = nn.Linear(1, 2)
    trainer = onthefly.Trainer(
        project="t", max_epochs=3, session=False, progress_bar=False, callbacks=[Watch()]
    )
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=DataLoader(DATA, sampler=sampler, batch_size=5),
    )
    assert epochs == [0, 1, 2]
