"""SampleTracker under Lightning: the loss found wherever the step computes it, and only the
step's own loss call counted."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, DistributedSampler

import onthefly
from onthefly.samples.store import NoData
from tests.callbacks.models import lightning_trainer
from tests.callbacks.sample_runs import N, assert_squares, squares, tracker_of, zero_linear


class Regression(pl.LightningModule):
    """Counts its forward calls; its loss module is handed to attach_lightning."""

    def __init__(self, per_sample_key: bool = False) -> None:
        super().__init__()
        self.net = zero_linear()
        self.loss = nn.MSELoss()
        self.forwards = 0
        self.steps = 0
        self.per_sample_key = per_sample_key

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.forwards += 1
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.steps += 1
        x, y = batch
        preds = self(x)
        if self.per_sample_key:
            per_sample = ((preds - y) ** 2).mean(1)
            return {"loss": per_sample.mean(), "per_sample_loss": per_sample}
        return self.loss(preds, y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


def test_lightning_with_a_distributed_sampler_and_no_extra_forward() -> None:
    sampler = DistributedSampler(squares(), num_replicas=2, rank=1, shuffle=True, seed=3)
    loader = DataLoader(squares(), batch_size=4, sampler=sampler, num_workers=2)
    model = Regression()
    trainer = lightning_trainer(max_epochs=2)
    onthefly.attach_lightning(trainer, project="samples", loss_fn=model.loss, quiet=True, port=0)
    trainer.fit(model, loader)
    assert model.forwards == model.steps  # the capture never runs the model
    expected = np.zeros(N, dtype=np.int64)
    for epoch in range(2):  # Lightning sets the sampler's epoch: a new shuffle each epoch
        sampler.set_epoch(epoch)
        np.add.at(expected, list(sampler), 1)
    stats = tracker_of(trainer.callbacks).store.training
    assert stats.count[:N].tolist() == expected.tolist()
    seen = np.flatnonzero(expected)
    np.testing.assert_allclose(stats.loss_last[seen], seen**2)
    assert "forward" not in vars(model.loss)  # the tap is gone after fit


def test_lightning_steps_may_return_their_own_per_sample_losses() -> None:
    model = Regression(per_sample_key=True)
    trainer = lightning_trainer(max_epochs=1)
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    trainer.fit(model, DataLoader(squares(), batch_size=8, shuffle=True))
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=1)


class Inline(pl.LightningModule):
    """The shapes a training step computes its loss in, none of them given to OnTheFly.

    ``how``: ``"functional"`` (``F.mse_loss`` inline), ``"attribute"`` (``self.loss``),
    ``"output"`` (the model returns a Hugging Face style ``.loss`` / ``.logits`` object,
    its loss computed inside ``forward``) or ``"custom"`` (a hand-written loss).
    """

    def __init__(self, how: str) -> None:
        super().__init__()
        self.net = zero_linear()
        self.loss = nn.MSELoss() if how == "attribute" else None
        self.how = how
        self.forwards = 0

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        self.forwards += 1
        logits = self.net(x)
        loss = nn.MSELoss()(logits, y) if self.how == "output" else None
        return SimpleNamespace(loss=loss, logits=logits)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        out = self(x, y)
        if self.how == "functional":
            return F.mse_loss(out.logits, y)
        if self.how == "attribute":
            assert self.loss is not None
            return self.loss(out.logits, y)
        if self.how == "output":
            return out.loss
        return ((out.logits - y) ** 2).mean()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("how", ["functional", "attribute", "output"])
def test_lightning_losses_are_captured_without_being_given(how: str) -> None:
    model = Inline(how)
    trainer = lightning_trainer(max_epochs=2)
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    trainer.fit(model, DataLoader(squares(), batch_size=8, shuffle=True))
    assert model.forwards == trainer.global_step  # one forward per step: none added
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=2)
    assert torch.overrides._get_current_function_mode() is None  # nothing left behind


class Unused(Inline):
    """Holds a loss module it never calls; its loss is a functional call."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__("functional")
        self.unused = nn.L1Loss()
        self.fail_at = fail_at

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        if batch_idx == self.fail_at:
            raise RuntimeError("the step failed")
        return loss


def test_a_held_loss_module_that_is_never_called_gives_way_to_the_functional_call() -> None:
    trainer = lightning_trainer(max_epochs=1)
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    trainer.fit(Unused(), DataLoader(squares(), batch_size=6))
    stats = tracker_of(trainer.callbacks).store.training
    # The first batch shows the hooked module is not the loss; every later one is recorded.
    assert np.flatnonzero(stats.count).tolist() == list(range(6, N))
    np.testing.assert_allclose(stats.loss_last[6:N], np.arange(6, N) ** 2)


def test_a_step_failing_while_watched_leaves_no_mode_behind() -> None:
    trainer = lightning_trainer(max_epochs=1)
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    with pytest.raises(RuntimeError, match="the step failed"):
        trainer.fit(Unused(fail_at=3), DataLoader(squares(), batch_size=6))
    assert torch.overrides._get_current_function_mode() is None
    F.mse_loss(torch.ones(2, requires_grad=True), torch.zeros(2))  # plain torch again


def test_a_loss_nothing_recognises_is_explained_in_the_reply() -> None:
    trainer = lightning_trainer(max_epochs=1)
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    trainer.fit(Inline("custom"), DataLoader(squares(), batch_size=5))
    with pytest.raises(NoData, match=r"'per_sample_loss'.*loss_fn=") as info:
        tracker_of(trainer.callbacks).store.view("train")
    assert "F.cross_entropy" in str(info.value)


class LossBetweenBatches(pl.Callback):
    """Calls the model's hooked loss module, on predictions with gradients and the batch's
    shape, at each batch's start or end: placed before OnTheFly (start) or after it (end),
    that is where no training batch is in progress for OnTheFly."""

    def __init__(self, hook: str, batch_size: int) -> None:
        self.hook = hook
        self.batch_size = batch_size
        self.calls = 0

    def _call(self, pl_module: Any, hook: str) -> None:
        if hook == self.hook:
            preds = torch.full((self.batch_size, 1), 100.0, requires_grad=True)
            pl_module.loss(preds, torch.zeros(self.batch_size, 1))
            self.calls += 1

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self._call(pl_module, "start")

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self._call(pl_module, "end")


def test_loss_calls_between_training_batches_are_not_counted() -> None:
    before, after = LossBetweenBatches("start", 6), LossBetweenBatches("end", 6)
    trainer = lightning_trainer(max_epochs=2, callbacks=[before])
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    trainer.callbacks.append(after)  # type: ignore[attr-defined]  # after OnTheFly's hooks
    trainer.fit(Inline("attribute"), DataLoader(squares(), batch_size=6, shuffle=True))
    assert before.calls == after.calls == 2 * N // 6
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=2)  # never 100**2
