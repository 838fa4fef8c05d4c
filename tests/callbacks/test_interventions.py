"""What the user triggers beside training — tests, health checks, scans, forks, a comparison,
a merge undone — leaves every random generator and the loaders' own generators as they were:
the run trains on exactly as if nothing had happened (see ``docs/hook-order.md``)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import onthefly
from onthefly.sessions.data_position import TrackedLoader
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.live import LiveClient
from tests.native.handwritten import setup

PAUSE_AT = 8  # in epoch 1 (6 batches per epoch)


class Numbers:
    def __init__(self) -> None:
        self.losses: list[float] = []
        self.val: list[float] = []
        self.generators_after: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(float(outputs["loss"]))

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.val.append(float(trainer.callback_metrics["val_loss"]))

    def on_fit_end(self, trainer: Any, pl_module: Any) -> None:
        loaders = (trainer.train_loader, trainer.val_loader, trainer.test_loader)
        self.generators_after = [TrackedLoader.unwrap(x).generator.get_state() for x in loaders]


INTERVENTIONS: list[tuple[str, dict[str, Any]]] = [
    ("test", {}),
    *[("health", {"check": check}) for check in ("gradients", "activations", "determinism")],
    ("health", {"check": "throughput"}),
    ("scan", {"split": "train"}),
    ("scan", {"split": "val"}),
    ("fork", {"name": "f", "indices": list(range(16)), "steps": 3}),
    ("compare", {}),
    ("merge", {"method": "soup", "forks": ["f"], "force": True}),  # applied, then undone
    ("discard_merge", {}),
]


def run(home: Path, script: bool) -> tuple[Numbers, dict[str, dict[str, Any]]]:
    """The train-then-validate script with a loader of its own generator, 3 epochs; with
    ``script``, paused at step 8 for every intervention, then resumed."""
    parts = setup(generator=True, workers=0)
    numbers, connect = Numbers(), Connect(home)
    callbacks: list[Any] = [connect, numbers]
    if script:
        callbacks.append(CommandsAt(connect, PAUSE_AT, ("pause", {})))
    trainer = onthefly.Trainer(
        project="interventions",
        max_epochs=3,
        val_every_n_epochs=1,
        callbacks=callbacks,
        progress_bar=False,
        quiet=True,
    )
    answers: dict[str, dict[str, Any]] = {}
    talk = threading.Thread(target=_intervene, args=(connect, answers), daemon=True)
    if script:
        talk.start()
    trainer.fit(
        model=parts.model,
        optimizer=parts.optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=parts.train,
        val_loader=parts.val,
        test_loader=parts.test,
        scheduler=parts.scheduler,
    )
    if script:
        talk.join(60)
    connect.finished().close()
    return numbers, answers


def _intervene(connect: Connect, answers: dict[str, dict[str, Any]]) -> None:
    while connect.client is None:
        threading.Event().wait(0.01)
    client: LiveClient = connect.client
    client.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")
    try:
        for kind, fields in INTERVENTIONS:
            answers[f"{kind} {sorted(fields.items())}"] = client.call(kind, timeout=120, **fields)
    finally:
        client.call("resume")


def test_interventions_at_a_pause_leave_the_run_bit_identical(onthefly_home: Path) -> None:
    plain, _ = run(onthefly_home, script=False)
    touched, answers = run(onthefly_home, script=True)
    failed = {k: a for k, a in answers.items() if a["type"] != "reply"}
    assert not failed and len(answers) == len(INTERVENTIONS), failed
    assert touched.losses == plain.losses
    assert touched.val == plain.val
    assert len(touched.generators_after) == len(plain.generators_after) == 3
    for got, expected in zip(touched.generators_after, plain.generators_after, strict=True):
        assert torch.equal(got, expected)


@pytest.mark.parametrize("isolated", [None, True])
def test_an_evaluation_from_a_callback_during_fit_draws_nothing(isolated: bool | None) -> None:
    class Evaluate:
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step == 3:
                trainer.run_validation(isolated=isolated)
                trainer.run_test(isolated=isolated)

    def fit(callbacks: list[Any]) -> Numbers:
        parts, numbers = setup(generator=True), Numbers()
        trainer = onthefly.Trainer(
            project="t",
            max_epochs=2,
            callbacks=[*callbacks, numbers],
            progress_bar=False,
            session=False,
        )
        trainer.fit(
            model=parts.model,
            optimizer=parts.optimizer,
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=parts.train,
            val_loader=parts.val,
            test_loader=parts.test,
        )
        return numbers

    evaluated, plain = fit([Evaluate()]), fit([])
    assert evaluated.losses == plain.losses
    assert len(evaluated.generators_after) == len(plain.generators_after) == 3
    for got, expected in zip(evaluated.generators_after, plain.generators_after, strict=True):
        assert torch.equal(got, expected)
