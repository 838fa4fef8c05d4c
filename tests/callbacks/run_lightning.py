"""A tiny Lightning training with OnTheFly, run as a subprocess by the control tests.

Usage: python -m tests.callbacks.run_lightning [--max-epochs N] [--max-steps N]
       [--step-sleep S] [--do-test-after] [--stamps FILE] [--ddp]

With ``--stamps`` it appends ``{"step": k, "t": time}`` when step k (1-based) starts, so a
test can tell which step was running when it sent a command (``FILE.<rank>`` with ``--ddp``).
``--ddp`` trains on two CPU processes; launch it with ``torchrun --nproc_per_node=2``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import lightning.pytorch as pl
import torch

import onthefly
from tests.callbacks.models import Tiny, lightning_trainer, loader


class Stamps(pl.Callback):
    def __init__(self, path: str, per_rank: bool) -> None:
        self.path = path
        self.per_rank = per_rank

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, idx: int) -> None:
        path = f"{self.path}.{trainer.global_rank}" if self.per_rank else self.path
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"step": trainer.global_step + 1, "t": time.time()}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-epochs", type=int, default=1000)
    parser.add_argument("--max-steps", type=int, default=-1)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--do-test-after", action="store_true")
    parser.add_argument("--stamps")
    parser.add_argument("--ddp", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    callbacks = [Stamps(args.stamps, args.ddp)] if args.stamps else []
    distributed = {"strategy": "ddp", "devices": 2} if args.ddp else {}
    trainer = lightning_trainer(
        max_epochs=args.max_epochs, max_steps=args.max_steps, callbacks=callbacks, **distributed
    )
    onthefly.attach_lightning(
        trainer,
        project="tests",
        run_name="sub",
        port=0,
        test_loader=loader(16, seed=2),
        do_test_after=args.do_test_after,
        flush_every_s=0.02,
    )
    trainer.fit(Tiny(step_sleep=args.step_sleep), loader(64), loader(16, seed=1))
    print(f"FIT RETURNED {trainer.global_step} ON RANK {trainer.global_rank}", flush=True)


if __name__ == "__main__":
    main()
