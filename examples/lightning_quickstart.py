"""OnTheFly with an existing Lightning training: one call, then ``trainer.fit`` as usual.

Run it, open the printed dashboard address (or VS Code's "OnTheFly: Show Dashboard"), and
pause, resume, test or stop the run while it trains::

    python examples/lightning_quickstart.py

With ``do_test_after=True`` the test data is evaluated when training ends; in a terminal
(or with a dashboard connected) the session then stays open, paused, so you can test again
or extend the run (resume with more epochs) until you press Stop or Ctrl+C.
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import onthefly


def two_moons(n: int, seed: int) -> TensorDataset:
    """A small synthetic classification problem (no download needed)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(n, generator=g) * torch.pi
    label = torch.randint(0, 2, (n,), generator=g)
    x = torch.stack([torch.cos(t), torch.sin(t)], 1)
    x = torch.where(label[:, None] == 1, 1 - x + torch.tensor([0.0, 0.5]), x)
    return TensorDataset(x + 0.1 * torch.randn(n, 2, generator=g), label)


class Classifier(pl.LightningModule):
    def __init__(self, hidden: int = 32, lr: float = 0.01) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 2))

    def _loss_acc(
        self, batch: tuple[torch.Tensor, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = batch
        logits = self.net(x)
        return F.cross_entropy(logits, y), (logits.argmax(1) == y).float().mean()

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        loss, acc = self._loss_acc(batch)
        self.log("train_acc", acc)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        loss, acc = self._loss_acc(batch)
        self.log_dict({"val_loss": loss, "val_acc": acc})

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        loss, acc = self._loss_acc(batch)
        self.log_dict({"test_loss": loss, "test_acc": acc})

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def main() -> None:
    torch.manual_seed(0)
    train = DataLoader(two_moons(4096, seed=0), batch_size=64, shuffle=True)
    val = DataLoader(two_moons(512, seed=1), batch_size=256)
    test = DataLoader(two_moons(512, seed=2), batch_size=256)

    trainer = pl.Trainer(max_epochs=5, logger=False, enable_checkpointing=False)
    onthefly.attach_lightning(
        trainer, project="quickstart", run_name="two-moons", test_loader=test, do_test_after=True
    )
    trainer.fit(Classifier(), train, val)


if __name__ == "__main__":
    main()
