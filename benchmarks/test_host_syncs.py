"""The host syncs OnTheFly adds per training step (target: 0).

Every tensor-to-host call (``.item()``, ``.cpu()``, ``.tolist()`` …) whose caller is
OnTheFly's own code on the training thread is counted during the steps between two flushes of
a native run. A shipment's values are read (``.numpy()`` of a host tensor) only once their
copy to the host is complete, so those calls never make the training loop wait; the window
lies between two shipments.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn

import onthefly
from benchmarks.workloads import WORKLOADS, make_loader

SYNC_NAMES = ("item", "cpu", "tolist", "numpy", "__float__", "__int__", "__bool__")


class _SyncCounter:
    """Counts tensor→host calls on the training thread whose caller is OnTheFly's own code."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        self.active = False
        self.thread = threading.get_ident()
        for name in SYNC_NAMES:
            monkeypatch.setattr(torch.Tensor, name, self._wrap(getattr(torch.Tensor, name)))

    def _wrap(self, original: Any) -> Any:
        def counted(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if self.active and threading.get_ident() == self.thread:
                frames = traceback.extract_stack(limit=4)[:-1]
                if any("/onthefly/" in frame.filename for frame in frames):
                    self.calls += 1
            return original(tensor, *args, **kwargs)

        return counted


def test_host_syncs_per_step(benchmark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """OnTheFly's host syncs during the steps between two flushes (target: 0 per step)."""
    torch.set_num_threads(1)
    counter = _SyncCounter(monkeypatch)

    class Window(pl.Callback):
        """Counts only inside steps 2..25, away from fit start/end and the periodic flush."""

        def on_train_batch_start(self, trainer: Any, *args: Any) -> None:
            counter.active = 2 <= trainer.global_step < 25

    work = WORKLOADS[0]

    def run() -> None:
        torch.manual_seed(0)
        model = work.make_model()
        trainer = onthefly.Trainer(
            project="bench", max_steps=40, progress_bar=False, quiet=True, callbacks=[Window()],
            flush_every_steps=1000, flush_every_s=1000.0,
        )  # fmt: skip
        trainer.fit(
            model=model,
            optimizer=torch.optim.Adam(model.parameters()),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=make_loader(work),
        )

    benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["host_syncs_per_step[native]"] = counter.calls / 23
    assert counter.calls == 0
