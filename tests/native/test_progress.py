"""The console progress bar."""

from __future__ import annotations

from typing import Any

import pytest

from onthefly.native.trainer import Trainer


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
