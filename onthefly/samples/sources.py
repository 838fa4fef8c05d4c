"""Where the per-sample features find the run's loss function and loaders.

The driver knows where each trainer keeps them (the native trainer holds them itself; under
Lightning they come from what the user gave ``attach_lightning`` / ``OnTheFly``, else from
the trainer, the datamodule or the module's ``*_dataloader()`` methods). A split with several
loaders uses the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

from torch import nn
from torch.nn.modules.loss import _Loss

from onthefly.drivers import driver
from onthefly.drivers.base import Split, TrainerHost
from onthefly.sessions.data_position import TrackedLoader


def loss_fn(trainer: TrainerHost, inputs: Any) -> Any:
    """The run's loss function, or ``None``."""
    return driver(trainer).loss_fn(inputs)


def loss_modules(trainer: TrainerHost, inputs: Any, given: bool = True) -> list[nn.Module]:
    """The loss modules the training step may call: the given ``loss_fn`` (when a module;
    not with ``given=False``), then the ``torch.nn`` losses held by the model
    (``self.loss = nn.CrossEntropyLoss()``)."""
    found: dict[int, nn.Module] = {}
    module = loss_fn(trainer, inputs) if given else None
    if isinstance(module, nn.Module):
        found[id(module)] = module
    model = trainer.lightning_module  # the native trainer's: the user's model
    if isinstance(model, nn.Module):
        for module in model.modules():
            if isinstance(module, _Loss):
                found.setdefault(id(module), module)
    return list(found.values())


def split_loader(trainer: TrainerHost, inputs: Any, split: str) -> Iterable[Any] | None:
    """The first loader of ``split`` (``"train"``, ``"val"`` or ``"test"``), or ``None``.

    The user's own loader: a training loader wrapped by the session's data-position
    tracking is returned unwrapped (iterating the wrapper would move the run's position, and
    a scan would not see its dataset indices).
    """
    found = driver(trainer).loaders(cast(Split, split), inputs)
    return TrackedLoader.unwrap(found[0]) if found else None


def first_loader(loaders: Any) -> Any:
    """The first of the loaders a trainer requested (a list, see
    :meth:`~onthefly.drivers.base.Driver.on_train_loaders_requested`), unwrapped."""
    return TrackedLoader.unwrap(loaders[0]) if loaders else None
