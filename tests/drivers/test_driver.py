"""Which driver answers for a trainer, and that asking again costs nothing nor keeps a run."""

from __future__ import annotations

import gc
import weakref

import lightning.pytorch as pl

import onthefly
from onthefly.drivers import driver
from onthefly.drivers.lightning import LightningDriver
from onthefly.drivers.native import NativeDriver


def _lightning_trainer() -> pl.Trainer:
    return pl.Trainer(
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )


def test_each_trainer_gets_its_own_driver_and_keeps_it() -> None:
    native = onthefly.Trainer(project="p", session=False, progress_bar=False, max_steps=1)
    lightning = _lightning_trainer()

    assert isinstance(driver(native), NativeDriver)
    assert isinstance(driver(lightning), LightningDriver)
    assert driver(native) is driver(native)  # asked at every step: built once
    assert driver(native).trainer is native
    assert driver(lightning).trainer is lightning


def test_a_driver_does_not_keep_its_trainer_alive() -> None:
    trainer = _lightning_trainer()
    driver(trainer)
    gone = weakref.ref(trainer)
    del trainer
    gc.collect()
    assert gone() is None


def test_an_object_without_attributes_still_gets_a_driver() -> None:
    class Slotted:
        __slots__ = ("global_step",)

    trainer = Slotted()
    assert isinstance(driver(trainer), NativeDriver)
    assert driver(trainer).trainer is trainer
