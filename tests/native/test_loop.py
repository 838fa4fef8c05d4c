"""The fit loop against the real ``lightning.Trainer``: same hooks, same order, same stopping."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import psutil
import pytest
import torch
from lightning.pytorch import Callback
from torch import nn

from onthefly.errors import ConfigurationError
from onthefly.trainer import Trainer
from tests.native.conftest import Recorder, loader, make_model

HOOKS = [
    name
    for name in vars(Callback)
    if (name.startswith("on_") or name in ("setup", "teardown"))
    and "predict" not in name
    and "sanity" not in name
    and "checkpoint" not in name
]


class LitWrapper(pl.LightningModule):
    """The same tiny model as a LightningModule."""

    def __init__(self) -> None:
        super().__init__()
        self.net = make_model()
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return self.loss_fn(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return self.loss_fn(self.net(x), y)

    def test_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        return self.validation_step(batch, batch_idx)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def lightning_trainer(callbacks: list[Any], **kwargs: Any) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        **kwargs,
    )


def native_trainer(callbacks: list[Any], **kwargs: Any) -> Trainer:
    return Trainer(project="t", session=False, progress_bar=False, callbacks=callbacks, **kwargs)


def native_fit(trainer: Trainer) -> None:
    model = make_model()
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(24),
        val_loader=loader(16),
        test_loader=loader(16),
    )


@pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning")
def test_hook_order_matches_lightning() -> None:
    expected = Recorder(HOOKS)
    lit = lightning_trainer([expected], max_epochs=2, check_val_every_n_epoch=1)
    module = LitWrapper()
    lit.fit(module, train_dataloaders=loader(24), val_dataloaders=loader(16))
    lit.test(module, dataloaders=loader(16), verbose=False)

    got = Recorder(HOOKS)
    trainer = native_trainer([got], max_epochs=2, val_every_n_epochs=1)
    native_fit(trainer)
    trainer.run_test()

    assert ("on_before_zero_grad",) in expected.calls  # the recorder sees the step's hooks
    assert got.calls == expected.calls


class StopAt(Callback):
    """Sets ``should_stop`` in a hook once ``global_step`` reaches ``step``."""

    def __init__(self, step: int, hook: str) -> None:
        super().__init__()
        self.step = step
        setattr(self, hook, self._maybe_stop)

    def _maybe_stop(self, trainer: Any, *args: Any) -> None:
        if trainer.global_step >= self.step:
            trainer.should_stop = True


@pytest.mark.parametrize("hook", ["on_train_batch_end", "on_before_optimizer_step"])
@pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning")
def test_should_stop_stops_where_lightning_stops(hook: str) -> None:
    expected = Recorder(HOOKS)
    lit = lightning_trainer([StopAt(4, hook), expected], max_epochs=5, check_val_every_n_epoch=1)
    lit.fit(LitWrapper(), train_dataloaders=loader(24), val_dataloaders=loader(16))

    got = Recorder(HOOKS)
    trainer = native_trainer([StopAt(4, hook), got], max_epochs=5, val_every_n_epochs=1)
    native_fit(trainer)

    assert got.calls == expected.calls
    assert (trainer.global_step, trainer.current_epoch) == (lit.global_step, lit.current_epoch)


@pytest.mark.filterwarnings("ignore:.*does not have many workers:UserWarning")
def test_max_steps_mid_epoch_matches_lightning() -> None:
    expected = Recorder(HOOKS)
    lit = lightning_trainer([expected], max_steps=5, check_val_every_n_epoch=1)
    lit.fit(LitWrapper(), train_dataloaders=loader(24), val_dataloaders=loader(16))

    got = Recorder(HOOKS)
    trainer = native_trainer([got], max_steps=5, val_every_n_epochs=1)
    native_fit(trainer)

    assert got.calls == expected.calls
    assert trainer.global_step == 5


def test_callback_can_extend_training_while_it_runs() -> None:
    class Extend:
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            if trainer.current_epoch == 0:
                trainer.fit_loop.max_epochs = 3

    trainer = native_trainer([Extend()], max_epochs=1)
    native_fit(trainer)
    assert trainer.current_epoch == 3
    assert trainer.global_step == 3 * 3  # 24 samples / batch 8


def test_step_interval_scheduler_steps_per_optimizer_step() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    trainer = native_trainer([], max_epochs=2)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(24),
        scheduler=scheduler,
        scheduler_interval="step",
    )
    assert optimizer.param_groups[0]["lr"] == 0.5**6


def test_epoch_interval_scheduler_steps_once_per_epoch() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    trainer = native_trainer([], max_epochs=3)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(24),
        scheduler=scheduler,
    )
    assert optimizer.param_groups[0]["lr"] == 0.5**3


def test_plateau_scheduler_is_stepped_with_val_loss() -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # An unreachable improvement threshold: every validation is a plateau.
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, patience=0, factor=0.5, threshold=10.0
    )
    trainer = native_trainer([], max_epochs=3, val_every_n_epochs=1)
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(24),
        val_loader=loader(16),
        scheduler=scheduler,
    )
    assert optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**3)


class _FailsAtBatch(Callback):
    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if trainer.global_step == 2:
            raise RuntimeError("user bug")


def test_an_epoch_cut_short_by_an_exception_shuts_its_loader_workers_down() -> None:
    # The exception's traceback keeps the epoch's iterator alive: its worker processes must
    # not outlive the loop (a worker dying later would make torch raise during cleanup).
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    model = make_model()
    workers = torch.utils.data.DataLoader(loader().dataset, batch_size=8, num_workers=1)
    trainer = native_trainer([_FailsAtBatch()], max_epochs=1)
    with pytest.raises(RuntimeError, match="user bug") as raised:
        trainer.fit(
            model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), workers
        )
    new = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert psutil.wait_procs(new, timeout=10)[1] == []
    assert raised.traceback  # the traceback (and the iterator in it) is still alive here


@pytest.mark.timeout(30)
def test_an_epoch_without_a_batch_is_a_configuration_error_not_a_hang() -> None:
    model = nn.Linear(2, 1)
    trainer = Trainer(project="t", max_steps=3, session=False, progress_bar=False)
    with pytest.raises(ConfigurationError, match="no batch in epoch 0"):
        trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.MSELoss(), [])
