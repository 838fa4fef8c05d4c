"""A real training run steered through the public client, paused at known steps.

:func:`run_paused` trains with :class:`onthefly.Trainer` (a real session server) and, on a
thread of its own, connects with :func:`onthefly.connect` as a user would. The run pauses
itself at the end of each step listed in ``scripts``; the script then runs with the client
and the trainer (the training thread waits at that boundary, so reading the model is safe),
and the run resumes when it returns.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from onthefly.client import Client
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect

Script = Callable[[Client, Any], None]


def run_paused(
    home: Any,
    scripts: dict[int, Script],
    *,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    train: DataLoader,
    val: DataLoader | None = None,
    run_name: str = "quality",
) -> None:
    """Train until one step past the last pause, running ``scripts[step]`` at each pause.

    Raises:
        Exception: whatever a script raised (the run is stopped then).
    """
    connect = Connect(home)
    steps = sorted(scripts)
    pauses = [CommandsAt(connect, step, ("pause", {})) for step in steps]
    trainer = onthefly.Trainer(
        project="quality",
        run_name=run_name,
        max_steps=steps[-1] + 1,
        progress_bar=False,
        quiet=True,
        port=0,
        callbacks=[connect, *pauses],
    )
    failures: list[BaseException] = []

    def talk() -> None:
        while connect.client is None:
            time.sleep(0.01)
        with onthefly.connect(run_name, timeout=120) as client:
            try:
                for step in steps:
                    _wait_paused(client, step)
                    scripts[step](client, trainer)
                    client.resume()
            except BaseException as exc:  # reported on the benchmark's thread
                failures.append(exc)
                client.stop()

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    trainer.fit(model, optimizer, nn.CrossEntropyLoss(), train, val)
    thread.join(60)
    if connect.client is not None:
        connect.client.close()
    if failures:
        raise failures[0]


def _wait_paused(client: Client, step: int, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.status()
        if status["state"] == "paused" and status["step"] == step:
            return
        time.sleep(0.02)
    raise TimeoutError(f"the run did not pause at step {step} within {timeout} s")


def selected(client: Client, name: str) -> list[int]:
    """The dataset indices of the selection ``name``."""
    rows = client.selection_rows(name, limit=10_000)["rows"]
    return [int(row["index"]) for row in rows]


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """``model``'s accuracy on ``(x, y)`` in eval mode (its mode put back)."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        value = float((model(x).argmax(1) == y).float().mean())
    model.train(was_training)
    return value
