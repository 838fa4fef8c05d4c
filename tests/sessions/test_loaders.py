"""The wrapped training loaders leave no worker processes behind when fit returns."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.sessions.training import Noisy, lightning_run, native_run, net


@pytest.mark.parametrize("run", [native_run, lightning_run], ids=["native", "lightning"])
def test_a_run_stopped_mid_epoch_leaves_no_workers(run) -> None:
    run(9, workers=2)  # 6 batches per epoch: it stops in the middle of the second
    assert multiprocessing.active_children() == []


def test_persistent_workers_stop_with_fit_and_the_loader_serves_the_next_fit() -> None:
    loader = DataLoader(Noisy(), batch_size=8, num_workers=2, persistent_workers=True)
    model = net()
    for steps in (9, 4):
        trainer = onthefly.Trainer(
            project="loaders", max_steps=steps, progress_bar=False, quiet=True
        )
        trainer.fit(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=loader,
        )
        assert trainer.global_step == steps
        assert multiprocessing.active_children() == []
