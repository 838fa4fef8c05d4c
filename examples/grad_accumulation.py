"""Gradient accumulation with a custom step: one optimizer step every 4 micro-batches.

The step owns the update; ``onthefly.Trainer`` counts the optimizer's real steps in
``trainer.global_step`` and fires ``on_before_optimizer_step`` before each of them.
``--epochs`` and ``--samples`` shrink the run; ``ONTHEFLY_SESSION=0`` runs it without a session.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import onthefly
from onthefly.native import StepState

ACCUMULATE = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--samples", type=int, default=4096)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(args.samples, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(args.samples, 1)
    train = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
    model = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))

    trainer = onthefly.Trainer(project="grad-accumulation", max_epochs=args.epochs)
    micro_batches = 0

    @trainer.training_step
    def step(batch: Any, state: StepState) -> dict[str, Any]:
        nonlocal micro_batches
        inputs, targets = batch
        with state.autocast:
            loss = state.loss_fn(state.model(inputs), targets)  # type: ignore[misc]
        # Scaled so that 4 accumulated micro-batches average like one large batch.
        state.backward(loss / ACCUMULATE)
        micro_batches += 1
        if micro_batches % ACCUMULATE == 0:
            state.scaler.step(state.optimizer)
            state.scaler.update()
            state.optimizer.zero_grad(set_to_none=True)
        return {"loss": loss}

    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
        loss_fn=nn.MSELoss(),
        train_loader=train,
    )
    print(
        f"micro-batches {micro_batches}  optimizer steps {trainer.global_step}  "
        f"last loss {float(trainer.callback_metrics['loss']):.4f}"
    )


if __name__ == "__main__":
    main()
