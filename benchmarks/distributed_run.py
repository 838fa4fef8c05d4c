"""One rank of the distributed benchmark: the MLP workload under DDP (gloo, CPU).

Usage (as a rank: RANK/WORLD_SIZE/MASTER_* set):
    python -m benchmarks.distributed_run --mode plain|bare|onthefly --out DIR [--steps N]

* ``plain``: a hand-written DDP loop (``DistributedSampler``, ``set_epoch``);
* ``bare``: ``onthefly.Trainer(session=False)``: the same DDP run without OnTheFly;
* ``onthefly``: ``onthefly.Trainer`` with its session (server on rank 0, control rounds).

Each rank writes ``DIR/result.<rank>.json``: wall and CPU seconds per step (this process,
all its threads) from step WARMUP to the end, the control interval and round cost it ended
with, and the start time of each step.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler

import onthefly
from benchmarks.workloads import WORKLOADS, make_loader

WARMUP = 10
WORK = WORKLOADS[0]  # the MLP


class Clock:
    """Wall and CPU time of the steady steps, and when each step started."""

    def __init__(self) -> None:
        self.start = self.end = (0.0, 0.0)
        self.started: list[float] = []

    def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
        self.started.append(time.time())
        if trainer.global_step == WARMUP:
            self.start = _now()

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        self.end = _now()


def _now() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _plain(steps: int, clock: Clock) -> None:
    dist.init_process_group("gloo")
    model = DistributedDataParallel(WORK.make_model())
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    base = make_loader(WORK)
    sampler: DistributedSampler[Any] = DistributedSampler(base.dataset, shuffle=True)
    loader = DataLoader(base.dataset, batch_size=WORK.batch_size, sampler=sampler)
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)
        for x, y in loader:
            if step == WARMUP:
                clock.start = _now()
            clock.started.append(time.time())
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            step += 1
            clock.end = _now()
            if step == steps:
                break
        epoch += 1


def _native(steps: int, clock: Clock, session: bool) -> dict[str, Any]:
    options: dict[str, Any] = {"quiet": True, "port": 0} if session else {}
    trainer = onthefly.Trainer(
        project="bench",
        run_name="dist",
        max_steps=steps,
        progress_bar=False,
        callbacks=[clock],
        session=session,
        **options,
    )
    model = WORK.make_model()
    trainer.fit(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=make_loader(WORK),
    )
    if not session:
        return {}
    sync = trainer.callbacks[0].session.ranks  # type: ignore[attr-defined]
    return {"interval": sync.interval, "round_s": sync.round_cost_s, "step_s": sync.step_time_s}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("plain", "bare", "onthefly"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=WORK.steps)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    clock = Clock()
    extra: dict[str, Any] = {}
    if args.mode == "plain":
        _plain(args.steps, clock)
    else:
        extra = _native(args.steps, clock, session=args.mode == "onthefly")
    rank = dist.get_rank()
    steps = args.steps - WARMUP
    result = {
        "s_per_step": (clock.end[0] - clock.start[0]) / steps,
        "cpu_s_per_step": (clock.end[1] - clock.start[1]) / steps,
        "started": clock.started,
        **extra,
    }
    Path(args.out, f"result.{rank}.json").write_text(json.dumps(result))
    if args.mode == "plain":  # the trainer destroys the group it made when the process exits
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
