"""A real training to explore from the dashboard: ``make demo``.

A small CNN learns to classify 10 kinds of noisy 28x28 patterns with ``onthefly.Trainer``
on the CPU: per-step loss, learning rate and gradient norm, accuracy, validation every
epoch, runtime stats and log records stream to the dashboard; Pause, Resume, Stop and Test
work from it. It runs for a few minutes (``--epochs`` changes that), then tests, holds
paused so you can keep exploring (extend it with Resume + epochs), and ends on Stop or
Ctrl+C.
"""

from __future__ import annotations

import argparse
import logging

import torch
import torchmetrics
from lightning.pytorch import Callback
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import onthefly

CLASSES = 10
log = logging.getLogger("demo")


def make_split(n: int, seed: int, prototypes: torch.Tensor) -> TensorDataset:
    """Noisy copies of one prototype per class; some samples are much noisier (hard ones)."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (n,), generator=generator)
    noise_scale = torch.where(torch.rand(n, generator=generator) < 0.1, 6.0, 2.5)
    noise = torch.randn(n, 1, 28, 28, generator=generator) * noise_scale.view(-1, 1, 1, 1)
    return TensorDataset(prototypes[labels] + noise, labels)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, CLASSES),
    )  # fmt: skip


class EpochLog(Callback):
    """Writes one log record per epoch: it shows up in the dashboard's logs panel."""

    def on_train_epoch_end(self, trainer: onthefly.Trainer, pl_module: nn.Module) -> None:
        val = trainer.callback_metrics.get("val_loss")
        log.info(
            "epoch %d done at step %d%s",
            trainer.current_epoch,
            trainer.global_step,
            "" if val is None else f", val_loss {float(val):.4f}",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--samples", type=int, default=8192)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    torch.set_num_threads(1)

    torch.manual_seed(0)
    prototypes = 0.6 * torch.randn(CLASSES, 1, 28, 28)
    train = make_split(args.samples, 1, prototypes)
    val = make_split(1024, 2, prototypes)
    test = make_split(1024, 3, prototypes)
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    trainer = onthefly.Trainer(
        project="demo",
        run_name="cnn",
        max_epochs=args.epochs,
        val_every_n_epochs=1,
        do_test_after=True,
        callbacks=[EpochLog()],
        metrics={"acc": torchmetrics.Accuracy(task="multiclass", num_classes=CLASSES)},
    )
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=DataLoader(train, batch_size=64, shuffle=True),
        val_loader=DataLoader(val, batch_size=256),
        test_loader=DataLoader(test, batch_size=256),
        scheduler=scheduler,
    )


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("\n[demo] stopped")
