"""A tiny Lightning run with OnTheFly on two CPU ranks, started by the distributed tests.

Usage: python -m tests.distributed.run_lightning --out DIR --strategy ddp|ddp_spawn
       [--step-sleep S]

Lightning starts the second rank itself (``ddp`` runs this script again, ``ddp_spawn``
spawns it). Each rank appends ``{"step", "lr", "t"}`` per trained batch to
``DIR/steps.<rank>.jsonl`` and ``{"step"}`` per test evaluation to ``DIR/tests.<rank>.jsonl``,
and prints ``FIT RETURNED <step> ON RANK <rank>``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

import onthefly
from tests.callbacks.models import Tiny, lightning_trainer, loader


class Record(pl.Callback):
    def __init__(self, out: str) -> None:
        self.out = out

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        lr = trainer.optimizers[0].param_groups[0]["lr"]
        self._write("steps", trainer, {"step": trainer.global_step, "lr": lr, "t": time.time()})

    def on_test_end(self, trainer: Any, pl_module: Any) -> None:
        self._write("tests", trainer, {"step": trainer.global_step})

    def _write(self, kind: str, trainer: Any, line: dict[str, Any]) -> None:
        path = Path(self.out) / f"{kind}.{trainer.global_rank}.jsonl"
        with path.open("a", encoding="utf-8") as file:
            file.write(json.dumps(line) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--strategy", choices=("ddp", "ddp_spawn"), required=True)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    trainer = lightning_trainer(
        max_epochs=1000, strategy=args.strategy, devices=2, callbacks=[Record(args.out)]
    )
    onthefly.attach_lightning(
        trainer,
        project="tests",
        run_name="dist",
        port=0,
        quiet=True,
        test_loader=loader(16, seed=2),
        flush_every_s=0.02,
    )
    trainer.fit(Tiny(step_sleep=args.step_sleep), loader(64))
    print(f"FIT RETURNED {trainer.global_step} ON RANK {trainer.global_rank}", flush=True)


if __name__ == "__main__":
    main()
