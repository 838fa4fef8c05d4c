"""OnTheFly: watch and steer a PyTorch training run while it trains.

The public API is a handful of names::

    onthefly.Trainer           # the native loop for plain PyTorch
    onthefly.OnTheFly          # one Lightning callback bundling everything
    onthefly.attach_lightning  # add OnTheFly to an existing lightning.Trainer
    onthefly.connect           # a Python client of a live session
    onthefly.show              # the dashboard of every run, inline in a notebook

Heavy names load lazily so that ``onthefly.connect`` and the CLI never import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onthefly.version import __version__

_LAZY = {
    "Trainer": "onthefly.trainer",
    "OnTheFly": "onthefly.callbacks.onthefly",
    "attach_lightning": "onthefly.lightning",
    "connect": "onthefly.client",
    "show": "onthefly.notebook",
}

__all__ = ["OnTheFly", "Trainer", "__version__", "attach_lightning", "connect", "show"]

if TYPE_CHECKING:
    from onthefly.callbacks.onthefly import OnTheFly
    from onthefly.client import connect
    from onthefly.lightning import attach_lightning
    from onthefly.notebook import show
    from onthefly.trainer import Trainer


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'onthefly' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
