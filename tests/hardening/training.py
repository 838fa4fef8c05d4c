"""A tiny native training with a live session, run as a subprocess by the hardening tests.

Usage: python -m tests.hardening.training --out DIR [--max-steps N] [--step-sleep S]
       [--slow-eval S] [--workers N] [--no-session] [--report FILE] [--lightning]
       [--own-sigterm CODE]

It trains a small MLP with dropout on shuffled data (so anything that touched the random
generators or the data order would change the losses) and writes, into ``DIR``:

* ``losses.json``: the loss of every step, in order (written when ``fit`` ends, however);
* ``threads.json``: the threads still alive once ``fit`` returned or raised (and the run's
  objects were collected), so a test can tell that the session left nothing running.

With ``--report`` it also appends the step and the process's memory (RSS) to ``FILE`` about
once a second. The step sleep paces a run that a test stops itself (``stop`` command);
``--slow-eval`` makes every evaluation forward (tests, scans) sleep, so a test can land a
Ctrl+C during one.
A ``KeyboardInterrupt`` (or OnTheFly's ``Terminated``, on SIGTERM) is raised again after the
files are written: the script ends the way a Python script ends on Ctrl+C. ``--lightning``
trains the same model under ``lightning.Trainer`` with ``attach_lightning``;
``--own-sigterm CODE`` installs the script's own SIGTERM handler first, which writes
``sigterm.txt`` and exits with ``CODE``.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import psutil
import torch
from lightning.pytorch import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import onthefly
from onthefly.errors import Terminated

FEATURES = 8


class Net(nn.Module):
    """An MLP with dropout; its forward sleeps ``eval_sleep`` seconds in eval mode."""

    def __init__(self, eval_sleep: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(FEATURES, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 2)
        )
        self.eval_sleep = eval_sleep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.eval_sleep and not self.training:
            time.sleep(self.eval_sleep)
        out: torch.Tensor = self.layers(x)
        return out


def data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=g)
    return TensorDataset(x, (x[:, 0] + x[:, 1] > 0).long())


class Losses(Callback):
    """Keeps every step's loss (one host sync per step: fine for a test)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_train_batch_end(self, trainer: Any, module: Any, outputs: Any, *args: Any) -> None:
        self.values.append(float(outputs["loss"]))


class Pace(Callback):
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_batch_end(self, *args: Any) -> None:
        time.sleep(self.seconds)


class Report(Callback):
    """Appends ``{"t", "step", "rss"}`` to a file about once a second (a load test's record)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.process = psutil.Process()
        self.next = 0.0

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        now = time.time()
        if now < self.next:
            return
        self.next = now + 1.0
        line = {"t": now, "step": trainer.global_step, "rss": self.process.memory_info().rss}
        with self.path.open("a") as out:
            out.write(json.dumps(line) + "\n")


def leftovers(grace: float = 5.0) -> list[str]:
    """The names of the threads other than this one still alive after ``grace`` seconds
    (a thread that is ending, e.g. a DataLoader queue's feeder, gets the time to end)."""
    here = threading.current_thread()
    deadline = time.monotonic() + grace
    for thread in threading.enumerate():
        if thread is not here:
            thread.join(max(deadline - time.monotonic(), 0.0))
    # A multiprocessing queue's feeder thread can stay blocked on the pipe of a DataLoader
    # worker that Ctrl+C already ended (seen once in ~10 runs on a loaded machine, after a
    # fork's loader was shut down): it is daemonic, holds nothing of the run and ends with
    # the interpreter, and the tests check separately that no worker process is left.
    return [
        t.name
        for t in threading.enumerate()
        if t is not here and t.is_alive() and t.name != "QueueFeederThread"
    ]


class LitNet(pl.LightningModule):
    """:class:`Net` under Lightning, with the same optimizer and loss."""

    def __init__(self, eval_sleep: float = 0.0) -> None:
        super().__init__()
        self.net = Net(eval_sleep)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        x, y = batch
        return {"loss": nn.functional.cross_entropy(self.net(x), y)}

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def fit_lightning(out: Path, max_steps: int, step_sleep: float) -> list[float]:
    """:func:`fit` under ``lightning.Trainer`` (session on, no workers)."""
    torch.manual_seed(0)
    losses = Losses()
    trainer = pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[losses, *([Pace(step_sleep)] if step_sleep else [])],
    )
    onthefly.attach_lightning(
        trainer, project="hardening", run_name="fuzzed", port=0, quiet=True, flush_every_s=0.02
    )
    try:
        trainer.fit(LitNet(), train_dataloaders=DataLoader(data(256, seed=0), batch_size=16))
        print(f"FIT RETURNED {trainer.global_step}", flush=True)
    finally:
        (out / "losses.json").write_text(json.dumps(losses.values))
    return losses.values


def fit(
    out: Path,
    max_steps: int = 1_000_000,
    step_sleep: float = 0.0,
    slow_eval: float = 0.0,
    workers: int = 0,
    session: bool = True,
    report: Path | None = None,
) -> list[float]:
    """Train from seed 0; returns the losses (also written to ``out/losses.json``)."""
    torch.manual_seed(0)
    model = Net(slow_eval)
    losses = Losses()
    callbacks: list[Callback] = [losses] + ([Pace(step_sleep)] if step_sleep else [])
    callbacks += [Report(report)] if report is not None else []
    # One step per event (flush_every_steps=1): the stream as dense as it gets, the load
    # these tests put on the server and its clients.
    options: dict[str, Any] = (
        {
            "port": 0,
            "quiet": True,
            "flush_every_steps": 1,
            "flush_every_s": 0.02,
            "runtime_interval_s": 0.2,
        }
        if session
        else {"session": False}
    )
    trainer = onthefly.Trainer(
        project="hardening",
        run_name="fuzzed",
        max_steps=max_steps,
        callbacks=callbacks,
        progress_bar=False,
        **options,
    )
    train = DataLoader(
        data(256, seed=0),
        batch_size=16,
        shuffle=True,
        num_workers=workers,
        persistent_workers=workers > 0,
    )
    try:
        trainer.fit(
            model=model,
            optimizer=torch.optim.Adam(model.parameters(), lr=1e-2),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=train,
            test_loader=DataLoader(data(64, seed=1), batch_size=16),
        )
        print(f"FIT RETURNED {trainer.global_step}", flush=True)
    finally:
        (out / "losses.json").write_text(json.dumps(losses.values))
    return losses.values


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-steps", type=int, default=1_000_000)
    parser.add_argument("--step-sleep", type=float, default=0.0)
    parser.add_argument("--slow-eval", type=float, default=0.0)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--no-session", action="store_true")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--lightning", action="store_true")
    parser.add_argument("--own-sigterm", type=int)
    args = parser.parse_args()
    torch.set_num_threads(1)
    # A test that finds the script hung sends SIGUSR1 for every thread's stack.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # As a terminal starts a script, whatever the test runner inherited (nohup, CI).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if args.own_sigterm is not None:
        signal.signal(signal.SIGTERM, _own_handler(args.out, args.own_sigterm))
    interrupted: BaseException | None = None
    try:
        if args.lightning:
            fit_lightning(args.out, args.max_steps, args.step_sleep)
        else:
            fit(
                args.out,
                args.max_steps,
                args.step_sleep,
                args.slow_eval,
                args.workers,
                session=not args.no_session,
                report=args.report,
            )
    except (KeyboardInterrupt, Terminated) as exc:
        interrupted = exc
    # Once the run and its exception are gone, nothing it started may still run.
    gc.collect()
    (args.out / "threads.json").write_text(json.dumps(leftovers()))
    if interrupted is not None:
        raise interrupted


def _own_handler(out: Path, code: int) -> Any:
    def handler(signum: int, frame: Any) -> None:
        (out / "sigterm.txt").write_text("handled by the script")
        sys.exit(code)

    return handler


if __name__ == "__main__":
    main()
