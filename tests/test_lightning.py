"""attach_lightning: attaching to an existing trainer, refusals, and loss parity."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from onthefly import OnTheFly, attach_lightning
from onthefly.errors import ConfigurationError
from tests.callbacks.models import Tiny, lightning_trainer, loader


class StepLosses(pl.Callback):
    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(outputs["loss"].clone())


def run(attach: bool) -> tuple[torch.Tensor, OnTheFly | None]:
    torch.manual_seed(0)
    model = Tiny()
    recorder = StepLosses()
    trainer = lightning_trainer(max_epochs=3, callbacks=[recorder])
    otf = None
    if attach:
        otf = attach_lightning(
            trainer,
            model,
            project="tests",
            port=0,
            quiet=True,
            test_loader=loader(16, seed=2),
            do_test_after=True,
        )
    trainer.fit(model, loader(64, shuffle=True), loader(16, seed=1))
    return torch.stack(recorder.losses), otf


def test_attaching_changes_no_loss_bit_for_bit() -> None:
    bare, _ = run(attach=False)
    live, otf = run(attach=True)
    assert otf is not None and otf.test_launcher.tests_run == 1  # the given test_loader
    assert len(bare) == 24
    assert torch.equal(bare, live)


def test_attach_appends_one_callback_and_keeps_the_inputs() -> None:
    trainer = lightning_trainer(max_epochs=1)
    model, test = Tiny(), loader(16)
    otf = attach_lightning(trainer, model, project="tests", test_loader=test, loss_fn=abs)
    assert trainer.callbacks[-1] is otf  # type: ignore[attr-defined]
    assert (otf.inputs.model, otf.inputs.test_loader, otf.inputs.loss_fn) == (model, test, abs)
    with pytest.raises(ConfigurationError, match="already has an OnTheFly callback"):
        attach_lightning(trainer, project="tests")


@pytest.mark.parametrize(
    ("trainer", "options", "message"),
    [
        (object(), {}, "expected a lightning.pytorch.Trainer"),
        (None, {"model": torch.nn.Linear(2, 2)}, "expected a lightning.pytorch.LightningModule"),
        (None, {"datamodule": object()}, "expected a LightningDataModule"),
        (None, {"keep_alive": 1}, "keep_alive=1; expected True, False or None"),
    ],
)
def test_bad_arguments_are_refused(trainer: Any, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        attach_lightning(trainer or lightning_trainer(), project="tests", **options)
