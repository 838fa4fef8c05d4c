"""HealthMonitor: the ``health`` command on live runs, under the native Trainer and Lightning.

Each check finds its planted problem and reports no warning or error on a healthy model;
training after the checks is bit-identical to a run without them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from onthefly.protocol import HealthCheck
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.models import Tiny, lightning_trainer
from tests.callbacks.models import loader as tiny_loader
from tests.health import models

CHECKS: list[HealthCheck] = ["determinism", "gradients", "instability", "activations", "throughput"]


class Losses(pl.Callback):
    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        self.losses.append(loss.detach().clone())


def checks_from(connect: Connect, step: int, checks: list[HealthCheck]) -> list[CommandsAt]:
    """One check per step from ``step`` on: a second ``health`` while one waits is busy."""
    return [CommandsAt(connect, step + i, ("health", {"check": c})) for i, c in enumerate(checks)]


def results(senders: list[CommandsAt]) -> list[dict[str, Any]]:
    answers = [answer for sender in senders for answer in sender.answers()]
    assert all(a["type"] == "reply" for a in answers), answers
    return [a["data"] for a in answers]


def problems(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in result["findings"] if f["severity"] != "info"]


def native_fit(
    home: Path | None,
    model: nn.Module,
    checks: list[HealthCheck],
    *,
    train_loader: Any = None,
    loss_fn: Any = F.cross_entropy,
    lr: float = 0.1,
    max_steps: int = 12,
    at: int = 3,
) -> tuple[Losses, list[CommandsAt], Connect | None]:
    losses = Losses()
    callbacks: list[Any] = [losses]
    connect, senders = None, []
    if home is not None:
        connect = Connect(home)
        senders = checks_from(connect, at, checks)
        callbacks = [connect, *senders, losses]
    trainer = onthefly.Trainer(
        project="tests",
        max_steps=max_steps,
        device="cpu",
        progress_bar=False,
        callbacks=callbacks,
        session=home is not None,
        **({"port": 0, "quiet": True} if home is not None else {}),
    )
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=lr),
        loss_fn=loss_fn,
        train_loader=train_loader if train_loader is not None else batches(),
    )
    return losses, senders, connect


def batches() -> list[Any]:
    # Pre-made batches: the loader costs nothing, so the healthy run is compute-bound.
    return list(models.loader(n=256, batch_size=16))


def test_a_healthy_native_run_has_no_problem_and_trains_bit_identically(
    onthefly_home: Path,
) -> None:
    losses, senders, connect = native_fit(onthefly_home, models.with_dropout(), CHECKS)
    found = results(senders)
    assert [r["check"] for r in found] == CHECKS
    assert [r["step"] for r in found] == [3, 4, 5, 6, 7]
    assert {r["check"]: problems(r) for r in found} == {c: [] for c in CHECKS}
    assert connect is not None
    client = connect.finished()
    events = client.of("health_result")
    assert [(e["check"], e["findings"]) for e in events] == [
        (r["check"], r["findings"]) for r in found
    ]
    client.close()
    bare, _, _ = native_fit(None, models.with_dropout(), [])
    assert torch.equal(torch.stack(losses.losses), torch.stack(bare.losses))


PLANTED = [
    pytest.param("determinism", models.nondeterministic, {}, id="nondeterministic-op"),
    pytest.param("activations", models.dead, {}, id="dead-layer"),
    pytest.param(
        "gradients",
        models.exploding,
        {"loss_fn": models.mse_on_logits, "lr": 1e-4},
        id="exploding-gradients",
    ),
    pytest.param(
        "instability",
        models.exploding,
        # Diverges to inf and NaN by step 4; the check looks at step 8.
        {"loss_fn": models.mse_on_logits, "lr": 0.05, "at": 8, "max_steps": 10},
        id="diverging-loss",
    ),
    pytest.param(
        "throughput",
        models.healthy,
        {"train_loader": DataLoader(models.SlowDataset(), batch_size=8)},
        id="slow-loader",
    ),
]


@pytest.mark.parametrize(("check", "make_model", "options"), PLANTED)
def test_each_check_finds_its_planted_problem_under_the_native_trainer(
    onthefly_home: Path, check: HealthCheck, make_model: Any, options: dict[str, Any]
) -> None:
    options = {"max_steps": 5, **options}
    _, senders, connect = native_fit(onthefly_home, make_model(), [check], **options)
    [result] = results(senders)
    found = problems(result)
    assert found, result
    summaries = " | ".join(f["summary"] for f in found)
    expected = {
        "determinism": "first differing gradient: 0.weight",
        "activations": "units of 1 are dead",
        "gradients": "exploding",
        "instability": "NaN or infinite loss",
        "throughput": "data loading is the bottleneck",
    }[check]
    assert expected in summaries
    assert connect is not None and connect.client is not None
    connect.client.close()


def test_a_custom_step_without_loss_fn_is_unsupported(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    [sender] = checks_from(connect, 2, ["gradients"])
    trainer = onthefly.Trainer(
        project="tests",
        max_steps=4,
        device="cpu",
        progress_bar=False,
        callbacks=[connect, sender],
        port=0,
        quiet=True,
    )
    model = models.healthy()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    @trainer.training_step
    def step(batch: Any, state: Any) -> dict[str, Any]:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(batch[0]), batch[1])
        loss.backward()
        optimizer.step()
        return {"loss": loss}

    trainer.fit(model=model, optimizer=optimizer, train_loader=batches())
    [answer] = sender.answers()
    assert answer["error"]["code"] == "unsupported"
    assert "pass loss_fn= to fit()" in answer["error"]["message"]
    assert trainer.global_step == 4
    assert connect.client is not None
    connect.client.close()


# --------------------------------------------------------------------------- Lightning


class NoisyTiny(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.noise = models.Noisy()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self.net(self.noise(x)), y)
        self.log("train_loss", loss)
        return loss


class ExplodingTiny(Tiny):
    def __init__(self) -> None:
        super().__init__()
        self.deep = models.exploding()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return models.mse_on_logits(self.deep(x), y)


def lightning_fit(
    home: Path | None, module: pl.LightningModule, checks: list[HealthCheck]
) -> tuple[Losses, list[CommandsAt], Connect | None]:
    losses = Losses()
    callbacks: list[Any] = [losses]
    connect, senders = None, []
    if home is not None:
        connect = Connect(home)
        senders = checks_from(connect, 3, checks)
        otf = onthefly.OnTheFly(project="tests", port=0, quiet=True)
        callbacks = [otf, connect, *senders, losses]
    trainer = lightning_trainer(max_steps=10, callbacks=callbacks)
    trainer.fit(module, tiny_loader(128, shuffle=True), tiny_loader(16, seed=1))
    return losses, senders, connect


def test_a_healthy_lightning_run_has_no_problem_and_trains_bit_identically(
    onthefly_home: Path,
) -> None:
    torch.manual_seed(0)
    losses, senders, connect = lightning_fit(onthefly_home, Tiny(), CHECKS)
    found = results(senders)
    assert {r["check"]: problems(r) for r in found} == {c: [] for c in CHECKS}
    assert connect is not None and connect.client is not None
    # The probes' self.log calls were discarded: train_acc was logged once per real step.
    client = connect.finished()
    steps = [e["step"] for e in client.of("metrics", split="train") if "train_acc" in e["values"]]
    assert steps == list(range(1, 11))
    client.close()
    torch.manual_seed(0)
    bare, _, _ = lightning_fit(None, Tiny(), [])
    assert torch.equal(torch.stack(losses.losses), torch.stack(bare.losses))


@pytest.mark.parametrize(
    ("check", "make_module", "expected"),
    [
        ("determinism", NoisyTiny, "first differing gradient: net.weight"),
        ("gradients", ExplodingTiny, "exploding"),
    ],
)
def test_planted_problems_are_found_under_lightning(
    onthefly_home: Path, check: HealthCheck, make_module: Any, expected: str
) -> None:
    torch.manual_seed(0)
    _, senders, connect = lightning_fit(onthefly_home, make_module(), [check])
    [result] = results(senders)
    assert expected in " | ".join(f["summary"] for f in problems(result))
    assert connect is not None and connect.client is not None
    connect.client.close()
