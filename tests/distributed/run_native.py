"""A tiny distributed ``onthefly.Trainer`` run, started by the distributed tests (2 ranks, gloo).

Usage (under ``torchrun --nproc_per_node=2`` or with RANK/WORLD_SIZE/MASTER_* set):
    python -m tests.distributed.run_native --out DIR [--max-steps N] [--step-sleep S]
        [--resume-from FILE] [--do-test-after]

Each rank appends one JSON line per trained batch to ``DIR/steps.<rank>.jsonl``:
``{"step", "epoch", "batch", "sampler_epoch", "lr", "loss", "t"}`` (``t``: when the batch
started), one line per test evaluation to ``DIR/tests.<rank>.jsonl``, and prints
``FIT RETURNED <step> ON RANK <rank>`` when ``fit`` returns. Once the file ``DIR/diverge``
exists, rank 1 adds 1.0 to one weight behind DDP's back (once).
"""

from __future__ import annotations

import argparse
import atexit
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import onthefly


class Record:
    """Writes each trained batch of this rank, and plants the divergence."""

    def __init__(self, out: Path, step_sleep: float) -> None:
        self.out = out
        self.step_sleep = step_sleep
        self.diverged = False
        self.started = 0.0

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        self.started = time.time()
        if self.step_sleep:
            time.sleep(self.step_sleep)

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, idx: int
    ) -> None:
        sampler = trainer.train_loader.sampler
        line = {
            "step": trainer.global_step,
            "epoch": trainer.current_epoch,
            "batch": idx,
            "sampler_epoch": getattr(sampler, "epoch", None),
            "lr": trainer.optimizer.param_groups[0]["lr"],
            "loss": outputs["loss"].item(),
            "t": self.started,
        }
        self._write("steps", trainer, line)
        if trainer.global_rank == 1 and not self.diverged and (self.out / "diverge").exists():
            self.diverged = True
            with torch.no_grad():
                pl_module[0].weight[0, 0] += 1.0

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        loss = trainer.callback_metrics["test_loss"]
        self._write("tests", trainer, {"step": trainer.global_step, "loss": float(loss)})

    def _write(self, kind: str, trainer: Any, line: dict[str, Any]) -> None:
        with (self.out / f"{kind}.{trainer.global_rank}.jsonl").open("a") as file:
            file.write(json.dumps(line) + "\n")


def data(n: int, seed: int, shuffle: bool) -> DataLoader[Any]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return DataLoader(TensorDataset(x, y), batch_size=4, shuffle=shuffle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-steps", type=int, default=10_000)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--resume-from")
    parser.add_argument("--do-test-after", action="store_true")
    args = parser.parse_args()
    # Registered first, so it runs last: after the trainer's own exit handlers.
    atexit.register(lambda: print(f"GROUP AT EXIT: {dist.is_initialized()}", flush=True))
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    trainer = onthefly.Trainer(
        project="tests",
        run_name="dist",
        max_steps=args.max_steps,
        val_every_n_epochs=1,
        do_test_after=args.do_test_after,
        callbacks=[Record(out, args.step_sleep)],
        progress_bar=False,
        port=0,
        quiet=True,
        flush_every_s=0.02,
    )
    # A seed per rank: dropout draws differ between ranks (DDP starts them from rank 0's weights).
    torch.manual_seed(100 + trainer.global_rank)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=data(64, seed=0, shuffle=True),
        val_loader=data(16, seed=1, shuffle=False),
        test_loader=data(16, seed=2, shuffle=False),
        resume_from=args.resume_from,
    )
    print(f"FIT RETURNED {trainer.global_step} ON RANK {trainer.global_rank}", flush=True)


if __name__ == "__main__":
    main()
