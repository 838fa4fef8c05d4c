"""The console progress bar."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch

from onthefly.native.progress import ProgressBar
from onthefly.trainer import Trainer


def test_progress_bar_shows_epoch_step_and_loss(
    fit_kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    Trainer(project="t", max_epochs=2, session=False).fit(**fit_kwargs)
    err = capsys.readouterr().err
    assert "Epoch 0" in err and "Epoch 1" in err
    assert "loss=" in err and "step=" in err


def test_progress_bar_off_prints_nothing(
    fit_kwargs: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    Trainer(project="t", max_epochs=1, session=False, progress_bar=False).fit(**fit_kwargs)
    assert capsys.readouterr().err == ""


def test_the_bar_shows_the_batch_it_just_counted(capsys: pytest.CaptureFixture[str]) -> None:
    bar = ProgressBar(enabled=True)
    bar.start_epoch(0, total=3)
    time.sleep(0.15)  # past tqdm's minimum redraw interval
    bar.advance(7, torch.tensor(0.5))
    shown = capsys.readouterr().err.split("\r")[-1]  # the last redraw, before closing
    bar.close()
    assert "1/3" in shown and "step=7" in shown and "loss=0.5" in shown
