"""Where the per-sample features find the run's model, loss function and loaders.

The native trainer holds them itself (``model``, ``loss_fn``, ``train_loader``, …). Under
Lightning they come from what the user gave ``attach_lightning`` / ``OnTheFly``
(:class:`~onthefly.callbacks.onthefly.RunInputs`), else from the trainer, the datamodule or
the module's ``*_dataloader()`` methods. A split with several loaders uses the first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import nn
from torch.nn.modules.loss import _Loss

from onthefly.callbacks._driver import is_lightning
from onthefly.sessions.data_position import TrackedLoader

_INPUT_NAMES = {"train": "train_loader", "val": "val_loader", "test": "test_loader"}
_LIGHTNING_NAMES = {"train": "train_dataloader", "val": "val_dataloaders", "test": None}
_HOOKS = {"train": "train_dataloader", "val": "val_dataloader", "test": "test_dataloader"}


def loss_fn(trainer: Any, inputs: Any) -> Any:
    """The run's loss function, or ``None``."""
    if is_lightning(trainer):
        return getattr(inputs, "loss_fn", None)
    return getattr(trainer, "loss_fn", None)


def loss_modules(trainer: Any, inputs: Any) -> list[nn.Module]:
    """The loss modules the training step may call: the given ``loss_fn`` (when a module),
    then the ``torch.nn`` losses held by the model (``self.loss = nn.CrossEntropyLoss()``)."""
    found: dict[int, nn.Module] = {}
    given = loss_fn(trainer, inputs)
    if isinstance(given, nn.Module):
        found[id(given)] = given
    model = trainer.lightning_module  # the native trainer's: the user's model
    if isinstance(model, nn.Module):
        for module in model.modules():
            if isinstance(module, _Loss):
                found.setdefault(id(module), module)
    return list(found.values())


def split_loader(trainer: Any, inputs: Any, split: str) -> Iterable[Any] | None:
    """The loader of ``split`` (``"train"``, ``"val"`` or ``"test"``), or ``None``.

    The user's own loader: a training loader wrapped by the session's data-position
    tracking is returned unwrapped (iterating the wrapper would move the run's position, and
    a scan would not see its dataset indices).
    """
    return TrackedLoader.unwrap(_split_loader(trainer, inputs, split))


def _split_loader(trainer: Any, inputs: Any, split: str) -> Iterable[Any] | None:
    if not is_lightning(trainer):
        loader: Iterable[Any] | None = getattr(trainer, _INPUT_NAMES[split], None)
        return loader  # any iterable of batches, as the native trainer takes it
    given = first_loader(getattr(inputs, _INPUT_NAMES[split], None))
    if given is not None:
        return given
    attribute = _LIGHTNING_NAMES[split]
    if attribute is not None:
        try:
            found = first_loader(getattr(trainer, attribute, None))
        except (AttributeError, RuntimeError):  # not set up yet
            found = None
        if found is not None:
            return found
    hook = _HOOKS[split]
    for owner in (
        getattr(inputs, "datamodule", None),
        trainer.datamodule,
        trainer.lightning_module,
    ):
        if owner is not None and is_overridden(hook, owner):
            return first_loader(getattr(owner, hook)())
    return None


def first_loader(loaders: Any) -> Any:
    """The first loader of Lightning's collections of loaders (dict, list, tuple)."""
    if isinstance(loaders, Mapping):
        return first_loader(next(iter(loaders.values()), None))
    listed = isinstance(loaders, Sequence) and not isinstance(loaders, (str, bytes))
    if listed and loaders and all(hasattr(item, "__iter__") for item in loaders):
        return first_loader(loaders[0])
    return loaders
