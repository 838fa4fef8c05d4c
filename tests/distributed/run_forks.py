"""A distributed ``onthefly.Trainer`` run for the fork and merge tests (2 ranks, gloo, CPU).

Usage (under ``torchrun --nproc_per_node=2`` or with RANK/WORLD_SIZE/MASTER_* set):
    python -m tests.distributed.run_forks --out DIR

A small network with BatchNorm (so a merge changes buffers too), SGD with momentum (so the
optimizer has state). Each rank appends one JSON line per trained batch to
``DIR/steps.<rank>.jsonl`` (as :mod:`tests.distributed.run_native` does). While the file
``DIR/slow`` exists, reading a training sample takes 10 ms: a fork then trains for longer
than the collective timeout the tests set.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

import onthefly
from tests.distributed.run_native import Record, data

SAMPLE_DELAY_S = 0.01


class SlowWhileFlagged(Dataset[Any]):
    """``base``, each sample taking :data:`SAMPLE_DELAY_S` to read while ``flag`` exists."""

    def __init__(self, base: TensorDataset, flag: Path) -> None:
        self.base = base
        self.flag = flag

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> Any:
        if self.flag.exists():
            time.sleep(SAMPLE_DELAY_S)
        return self.base[index]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trainer = onthefly.Trainer(
        project="tests",
        run_name="dist-forks",
        max_steps=10_000,
        callbacks=[Record(out, step_sleep=0.03)],
        progress_bar=False,
        port=0,
        quiet=True,
        flush_every_s=0.02,
    )
    torch.manual_seed(100 + trainer.global_rank)  # DDP starts every rank from rank 0's weights
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train = data(64, seed=0, shuffle=True)
    slow = SlowWhileFlagged(train.dataset, out / "slow")  # type: ignore[arg-type]
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=DataLoader(slow, batch_size=4, shuffle=True),
        val_loader=data(16, seed=1, shuffle=False),
    )
    print(f"FIT RETURNED {trainer.global_step} ON RANK {trainer.global_rank}", flush=True)


if __name__ == "__main__":
    main()
