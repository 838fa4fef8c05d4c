"""Empty and odd data: every case ends at once, with an error that names the fix or cleanly.

Each run has a live session (so a hang would also show as a discovery file left behind):
an empty training loader (with ``max_steps`` alone it used to train forever), a loader used up
after its first epoch, a loader that raises on its first batch, and models whose output or
loss the default step cannot use. Lightning with an empty loader ends as Lightning does.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

import onthefly
from onthefly.errors import ConfigurationError
from tests.callbacks.live import session_files


def _pairs(n: int) -> TensorDataset:
    x = torch.randn(n, 4)
    return TensorDataset(x, (x[:, 0] > 0).long())


class Broken(Dataset[Any]):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> Any:
        raise OSError(f"sample {index} is unreadable")


class DictModel(nn.Module):
    """A model returning a dict, as Hugging Face models do."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.layer(x)}


def fit(
    loader: Any,
    model: nn.Module | None = None,
    loss_fn: Any = None,
    **limits: int,
) -> onthefly.Trainer:
    model = model or nn.Linear(4, 2)
    trainer = onthefly.Trainer(
        project="odd", progress_bar=False, quiet=True, port=0, **(limits or {"max_steps": 5})
    )
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=loss_fn or nn.CrossEntropyLoss(),
        train_loader=loader,
    )
    return trainer


def used_up() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    dataset = _pairs(8)
    yield from ((dataset.tensors[0][i : i + 4], dataset.tensors[1][i : i + 4]) for i in (0, 4))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("loader", "limits"),
    [
        (DataLoader(_pairs(0), batch_size=4), {"max_steps": 5}),
        (DataLoader(_pairs(0), batch_size=4), {"max_epochs": 3}),
        (DataLoader(_pairs(3), batch_size=4, drop_last=True), {"max_steps": 5}),
        ([], {"max_steps": 5}),
    ],
    ids=["empty, max_steps", "empty, max_epochs", "smaller than a batch", "empty list"],
)
def test_an_empty_training_loader_is_a_configuration_error(
    loader: Any, limits: dict[str, int], onthefly_home: Path
) -> None:
    with pytest.raises(ConfigurationError, match="yielded no batch in epoch 0; expected at least"):
        fit(loader, **limits)
    assert session_files(onthefly_home) == []


@pytest.mark.timeout(60)
def test_an_iterator_used_up_after_one_epoch_is_named(onthefly_home: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"no batch in epoch 1.*an iterator or generator"):
        fit(used_up(), max_steps=10)
    assert session_files(onthefly_home) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("workers", [0, 1])
def test_a_loader_that_raises_on_its_first_batch_ends_the_run_with_its_error(
    workers: int, onthefly_home: Path
) -> None:
    with pytest.raises(OSError, match=r"sample \d+ is unreadable"):
        fit(DataLoader(Broken(), batch_size=4, num_workers=workers), max_steps=5)
    assert session_files(onthefly_home) == []


@pytest.mark.timeout(60)
class ScoresModel(nn.Module):
    """A model returning a dict without ``logits``: the default step cannot tell its predictions."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"scores": self.layer(x)}


def test_a_model_output_without_predictions_gets_an_error_naming_the_fix(
    onthefly_home: Path,
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        fit(DataLoader(_pairs(8), batch_size=4), model=ScoresModel())
    message = str(caught.value)
    assert "a dict with keys 'scores'" in message and "'logits'" in message
    assert "@trainer.training_step" in message
    assert session_files(onthefly_home) == []


def test_a_dict_with_logits_trains_under_the_default_step() -> None:
    trainer = fit(DataLoader(_pairs(8), batch_size=4), model=DictModel())
    assert trainer.global_step == 5


@pytest.mark.timeout(60)
def test_a_loss_that_is_not_a_scalar_is_named(onthefly_home: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"shape \(4,\).*reduction='none' needs .mean"):
        fit(DataLoader(_pairs(8), batch_size=4), loss_fn=nn.CrossEntropyLoss(reduction="none"))


def test_a_tensor_output_with_a_wrong_shape_keeps_torchs_error() -> None:
    with pytest.raises((RuntimeError, ValueError)) as caught:
        fit(DataLoader(_pairs(8), batch_size=4), loss_fn=lambda out, y: F.cross_entropy(out, y[:2]))
    assert not isinstance(caught.value, ConfigurationError)


class _Module(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 2)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.layer(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:Total length of")
@pytest.mark.filterwarnings("ignore:.*does not have many workers")
def test_lightning_with_an_empty_loader_ends_cleanly(onthefly_home: Path) -> None:
    trainer = pl.Trainer(
        max_steps=5,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    onthefly.attach_lightning(trainer, project="odd", quiet=True, port=0)
    trainer.fit(_Module(), train_dataloaders=DataLoader(_pairs(0), batch_size=4))
    assert trainer.global_step == 0
    assert session_files(onthefly_home) == []
