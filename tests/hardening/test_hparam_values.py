"""Values that would kill a run: refused before they touch it, or survived if they get past.

Against live runs under both drivers: ``set lr=1e300`` and ``weight_decay=1e308`` (which used
to pass validation and then kill the run inside the optimizer's step), an ``lr`` that only
Adam's bias correction overflows, and the same rule for a fork's ``lr`` and a merge's weights
and temperature: each refused as ``unsupported`` with nothing changed. Then an optimizer the
checks cannot foresee (a third-party class that refuses large learning rates in its own
step): the accepted edit's next step fails, and the run survives it: the edit is rolled back,
``hparam_change`` and ``hparam_error`` events say so, the run pauses, and it trains on after
``resume`` to a normal end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from onthefly.server.discovery import SessionFile
from tests.callbacks.live import wait_for_session
from tests.hardening.training import Pace, data
from tests.hardening.wire import Wire

LR = 0.05


class Ceiling(torch.optim.SGD):
    """SGD that refuses, in its own step, a learning rate over its ceiling. Its constructor
    takes an argument its param groups do not hold, so no copy of it can be built."""

    def __init__(self, params: Any, ceiling: float, lr: float) -> None:
        super().__init__(params, lr=lr)
        self.ceiling = ceiling

    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["lr"] > self.ceiling:
                raise RuntimeError(f"lr {group['lr']} is over this optimizer's ceiling")
        super().step()
        return loss


def net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))


class Module(pl.LightningModule):
    def __init__(self, optimizer: str) -> None:
        super().__init__()
        self.net = net()
        self.kind = optimizer

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> Any:
        if self.kind == "ceiling":
            return Ceiling(self.parameters(), ceiling=1.0, lr=LR)
        return torch.optim.Adam(self.parameters(), lr=1e-3)


@contextmanager
def live(home: Path, driver: str, optimizer: str) -> Iterator[tuple[SessionFile, list[Any]]]:
    """A run on a thread of this process; yields its session and, once built, its optimizer
    (the list's first item). It is stopped on the way out and must have ended normally."""
    built: list[Any] = []
    failures: list[BaseException] = []
    loader = DataLoader(data(256, seed=0), batch_size=16, shuffle=True)
    session_options = {"port": 0, "quiet": True, "flush_every_s": 0.02}

    def native() -> None:
        model = net()
        opt = (
            Ceiling(model.parameters(), ceiling=1.0, lr=LR)
            if optimizer == "ceiling"
            else torch.optim.Adam(model.parameters(), lr=1e-3)
        )
        built.append(opt)
        trainer = onthefly.Trainer(
            project="values",
            max_steps=100_000,
            callbacks=[Pace(0.005)],
            progress_bar=False,
            **session_options,
        )
        trainer.fit(model=model, optimizer=opt, loss_fn=nn.CrossEntropyLoss(), train_loader=loader)

    def lightning() -> None:
        trainer = pl.Trainer(
            max_steps=100_000,
            accelerator="cpu",
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            callbacks=[Pace(0.005)],
        )
        onthefly.attach_lightning(trainer, project="values", **session_options)
        module = Module(optimizer)
        module.on_train_start = lambda: built.append(trainer.optimizers[0])  # type: ignore[method-assign]
        trainer.fit(module, train_dataloaders=loader)

    def run() -> None:
        try:
            (native if driver == "native" else lightning)()
        except BaseException as exc:
            failures.append(exc)

    thread = threading.Thread(target=run, name="training")
    thread.start()
    session = None
    try:
        session = wait_for_session(home)
        yield session, built
    finally:
        if session is not None:
            control = Wire(session)
            control.call("stop")
            control.close()
        thread.join(timeout=60)
    assert not thread.is_alive()
    assert failures == []  # the run ended normally


def refusal(wire: Wire, kind: str, **fields: Any) -> str:
    answer = wire.call(kind, **fields)
    assert answer["type"] == "error" and answer["error"]["code"] == "unsupported", answer
    message: str = answer["error"]["message"]
    return message


@pytest.mark.parametrize("driver", ["native", "lightning"])
def test_values_that_would_kill_the_run_are_refused_first(driver: str, onthefly_home: Path) -> None:
    with live(onthefly_home, driver, "adam") as (session, built):
        wire = Wire(session)
        wire.call("subscribe", since=0)
        wire.wait(lambda: built or None)
        assert "lr=1e+300 overflows float32" in refusal(wire, "set", lr=1e300)
        assert "weight_decay=1e+308 overflows" in refusal(wire, "set", weight_decay=1e308)
        assert "rounds to 1 in float32" in refusal(wire, "set", betas=[0.9, 1 - 1e-9])
        assert wire.call("pause")["type"] == "reply"
        assert "lr=1e+300 overflows" in refusal(
            wire, "fork", indices=[0, 1, 2, 3], steps=2, lr=1e300
        )
        fork = wire.call("fork", indices=[0, 1, 2, 3], steps=2, name="f", timeout=60)
        assert fork["type"] == "reply", fork
        wire.wait_event(lambda e: e["type"] == "fork_progress" and e["state"] == "done")
        assert "weights sum to" in refusal(
            wire, "merge", method="soup", forks=["f"], weights=[1e308, 1e308]
        )
        assert "temperature=1e-300" in refusal(
            wire, "merge", method="distill", forks=["f"], temperature=1e-300
        )
        assert wire.call("resume")["type"] == "reply"
        optimizer = built[0]
        assert optimizer.param_groups[0]["lr"] == 1e-3  # nothing changed
        step = wire.call("status")["data"]["step"]
        wire.wait(lambda: wire.call("status")["data"]["step"] > step + 10 or None)
        wire.close()


@pytest.mark.parametrize("driver", ["native", "lightning"])
def test_an_edit_the_optimizer_then_fails_on_is_rolled_back_and_the_run_pauses(
    driver: str, onthefly_home: Path
) -> None:
    with live(onthefly_home, driver, "ceiling") as (session, built):
        wire = Wire(session)
        wire.call("subscribe", since=0)
        wire.wait(lambda: built or None)
        accepted = wire.call("set", lr=5.0)  # over the ceiling: only its step knows
        assert accepted["type"] == "reply", accepted
        failed = wire.wait_event(lambda e: e["type"] == "hparam_error")
        paused = wire.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")
        assert failed["message"] == "RuntimeError: lr 5.0 is over this optimizer's ceiling"
        assert failed["rolled_back"] == [
            {"group": 0, "name": "lr", "restored": LR, "rejected": 5.0}
        ]
        assert paused["reason"] == "the optimizer failed under a set: rolled back"
        changes = [(e["old"], e["new"]) for e in wire.events if e["type"] == "hparam_change"]
        assert changes == [(LR, 5.0), (5.0, LR)]
        optimizer = built[0]
        assert optimizer.param_groups[0]["lr"] == LR
        assert "step" not in vars(optimizer)  # the guard is gone
        assert wire.call("status")["data"]["state"] == "paused"
        assert wire.call("resume")["type"] == "reply"
        step = wire.call("status")["data"]["step"]
        wire.wait(lambda: wire.call("status")["data"]["step"] > step + 10 or None)
        wire.close()
