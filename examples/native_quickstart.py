"""Train a small classifier with ``onthefly.Trainer`` and watch it live.

Run ``python examples/native_quickstart.py`` and open the dashboard (VS Code: "OnTheFly: Show
Dashboard", or the address it prints). ``ONTHEFLY_SESSION=0`` runs the same loop without the
live session; ``--epochs N`` changes the length.
"""

from __future__ import annotations

import argparse

import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, random_split

import onthefly


def make_data(n: int = 2048) -> tuple[DataLoader, DataLoader, DataLoader]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 16, generator=generator)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4:8].sum(1) > 1).long()  # 3 classes
    train, val, test = random_split(TensorDataset(x, y), [0.8, 0.1, 0.1], generator=generator)
    return (
        DataLoader(train, batch_size=64, shuffle=True),
        DataLoader(val, batch_size=256),
        DataLoader(test, batch_size=256),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 3))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train, val, test = make_data()

    trainer = onthefly.Trainer(
        project="quickstart",
        max_epochs=args.epochs,
        val_every_n_epochs=1,
        do_test_after=True,
        metrics={"acc": torchmetrics.Accuracy(task="multiclass", num_classes=3)},
    )
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=train,
        val_loader=val,
        test_loader=test,
    )
    results = trainer.run_test()
    print(f"test loss {results['loss']:.4f}  test acc {results['acc']:.3f}")


if __name__ == "__main__":
    main()
