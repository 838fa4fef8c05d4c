"""A ``DataLoader`` with every setting away from its default, to see what a new loader keeps."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, default_collate


def collate(items: list[Any]) -> Any:
    """The user's collate function (``default_collate``, under a name of its own)."""
    return default_collate(items)


def init_worker(worker: int) -> None:
    """The user's worker init function."""


def configured_loader(dataset: Dataset[Any], **changes: Any) -> DataLoader[Any]:
    """A shuffled loader over ``dataset`` with two workers and every option set (``changes``
    replace them). It is never iterated with its workers here: that would start them."""
    settings: dict[str, Any] = {
        "batch_size": 3,
        "shuffle": True,
        "num_workers": 2,
        "collate_fn": collate,
        "pin_memory": True,
        "drop_last": True,
        "timeout": 7,
        "worker_init_fn": init_worker,
        "multiprocessing_context": "spawn",
        "prefetch_factor": 3,
        "persistent_workers": True,
        "generator": torch.Generator().manual_seed(1),
        "in_order": False,
    }
    return DataLoader(dataset, **(settings | changes))
