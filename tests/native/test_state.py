"""The custom step's ``state``: attributes and, as steps written for the original OnTheFly
expect, a mapping of the same fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import onthefly
from onthefly.native.state import StepState
from tests.callbacks.conftest import Connect
from tests.native.conftest import loader


def test_every_field_reads_as_a_key_too() -> None:
    model = nn.Linear(2, 1)
    state = StepState(
        model=model,
        optimizer=torch.optim.SGD(model.parameters()),
        loss_fn=None,
        device=torch.device("cpu"),
        autocast=None,  # type: ignore[arg-type]
        scaler=None,  # type: ignore[arg-type]
        scheduler=None,
        step=3,
    )
    assert list(state) == [
        "model", "optimizer", "loss_fn", "device", "autocast", "scaler", "scheduler",
        "metrics", "step", "epoch", "batch_idx", "dataloader_idx",
    ]  # fmt: skip
    assert all(state[key] is getattr(state, key) for key in state)
    assert dict(state)["step"] == 3 and len(state) == 12 and "model" in state
    assert "_hooks" not in state
    with pytest.raises(KeyError, match="'opt': the step state has no such field"):
        state["opt"]


class Stepped:
    """Counts the optimizer's real steps and keeps each step's outputs."""

    def __init__(self) -> None:
        self.outputs: list[dict[str, Any]] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.outputs.append(outputs)


def test_the_gradient_accumulation_step_of_the_original_readme_runs_unchanged(
    onthefly_home: Path,
) -> None:
    connect, stepped = Connect(onthefly_home), Stepped()
    trainer = onthefly.Trainer(
        project="accumulate",
        max_epochs=2,
        callbacks=[connect, stepped],
        progress_bar=False,
        quiet=True,
    )
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    steps: list[int] = []
    optimizer.register_step_post_hook(lambda *args: steps.append(1))

    # The snippet, as users bring it:
    @trainer.training_step
    def train_step(batch, state):  # type: ignore[no-untyped-def]
        accum = 4
        idx = train_step.counter % accum
        if idx == 0:
            state["optimizer"].zero_grad(set_to_none=True)
        x, y = batch
        with state["autocast"]:
            logits = state["model"](x.to(state["device"]))
            loss = state["loss_fn"](logits, y.to(state["device"])) / accum
        state["scaler"].scale(loss).backward()
        if idx == accum - 1:
            state["scaler"].step(state["optimizer"])
            state["scaler"].update()
        train_step.counter += 1
        return {"loss": loss.detach()}

    train_step.counter = 0  # type: ignore[attr-defined]

    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(32, batch_size=4),  # 8 micro-batches per epoch
    )

    assert train_step.counter == 16  # type: ignore[attr-defined]
    assert len(steps) == trainer.global_step == 4  # one optimizer step per 4 micro-batches
    client = connect.finished()
    streamed = client.of("metrics", split="train")
    # The returned dict is the metrics stream: at each optimizer step, the mean of the
    # losses the step's micro-batches returned.
    assert [e["step"] for e in streamed] == [1, 2, 3, 4]
    returned = [o["loss"].item() for o in stepped.outputs]
    means = [sum(returned[i : i + 4]) / 4 for i in range(0, 16, 4)]
    assert [e["values"]["loss"] for e in streamed] == pytest.approx(means, rel=1e-5)
    client.close()
