"""The training scripts people write by hand, and the same run under ``onthefly.Trainer``.

A pytorch/examples-style script: each epoch trains on a shuffled loader (dropout, SGD with
momentum, a StepLR stepped per epoch), then evaluates a ``shuffle=False`` validation loader;
a test pass at the end. With ``generator=True`` every loader has a generator of its own.
Whatever the loaders draw from (the global generator, or their own), :func:`onthefly_run`
must give the numbers of :func:`plain_run` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import onthefly


class Noisy(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """A 2-class problem; with ``noise``, every read draws fresh noise from the global
    generator (a random augmentation)."""

    def __init__(self, n: int, seed: int, noise: bool = True) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 6, generator=g)
        self.y = (self.x.sum(1) > 0).long()
        self.noise = noise

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.x[i] + 0.1 * torch.randn(6) if self.noise else self.x[i]
        return x, self.y[i]


@dataclass
class Setup:
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    train: DataLoader[Any]
    val: DataLoader[Any]
    test: DataLoader[Any]


def setup(generator: bool = False, workers: int = 0, noisy_eval: bool = True) -> Setup:
    """The model, optimizer, scheduler and loaders, built the same way every time."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    own = torch.Generator().manual_seed(1) if generator else None
    train = DataLoader(Noisy(48, 0), batch_size=8, shuffle=True, generator=own, num_workers=workers)
    val_own = torch.Generator().manual_seed(2) if generator else None
    test_own = torch.Generator().manual_seed(3) if generator else None
    val = DataLoader(Noisy(20, 1, noisy_eval), batch_size=8, generator=val_own)
    test = DataLoader(Noisy(12, 2, noisy_eval), batch_size=5, generator=test_own)
    torch.manual_seed(123)  # the script's seed, after building
    return Setup(model, optimizer, scheduler, train, val, test)


@dataclass
class Record:
    """The numbers a run produced, in order."""

    train: list[float] = field(default_factory=list)
    val: list[float] = field(default_factory=list)
    test: list[float] = field(default_factory=list)
    rng_after: torch.Tensor | None = None


def _evaluate(model: nn.Module, loader: DataLoader[Any]) -> float:
    model.eval()
    total, samples = torch.zeros(()), 0
    with torch.no_grad():
        for x, y in loader:
            total += nn.functional.cross_entropy(model(x), y).float() * len(y)
            samples += len(y)
    model.train()
    return float(total / samples)


def plain_run(
    epochs: int = 3, generator: bool = False, workers: int = 0, noisy_eval: bool = True
) -> Record:
    """The hand-written loop: train, validate, step the scheduler; test at the end."""
    run, record = setup(generator, workers, noisy_eval), Record()
    for _ in range(epochs):
        for x, y in run.train:
            run.optimizer.zero_grad()
            loss = nn.functional.cross_entropy(run.model(x), y)
            loss.backward()
            run.optimizer.step()
            record.train.append(loss.item())
        run.scheduler.step()
        record.val.append(_evaluate(run.model, run.val))
    record.test.append(_evaluate(run.model, run.test))
    record.rng_after = torch.get_rng_state()
    return record


class _Numbers:
    def __init__(self, record: Record) -> None:
        self.record = record

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.record.train.append(float(outputs["loss"]))

    def on_validation_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.record.val.append(float(trainer.callback_metrics["val_loss"]))

    def on_test_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self.record.test.append(float(trainer.callback_metrics["test_loss"]))


def onthefly_run(
    epochs: int = 3,
    generator: bool = False,
    workers: int = 0,
    noisy_eval: bool = True,
    session: bool = False,
) -> Record:
    """The same script ported to ``onthefly.Trainer`` (with the session, the test is its
    ``do_test_after``; without, ``run_test()`` after ``fit``)."""
    run, record = setup(generator, workers, noisy_eval), Record()
    trainer = onthefly.Trainer(
        project="fidelity",
        max_epochs=epochs,
        val_every_n_epochs=1,
        do_test_after=session,
        callbacks=[_Numbers(record)],
        progress_bar=False,
        session=session,
        **({"quiet": True} if session else {}),
    )
    trainer.fit(
        model=run.model,
        optimizer=run.optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=run.train,
        val_loader=run.val,
        test_loader=run.test,
        scheduler=run.scheduler,
    )
    if not session:
        trainer.run_test()
    record.rng_after = torch.get_rng_state()
    return record
