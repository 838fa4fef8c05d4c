"""Small data sets of the conformance scripts: scikit-learn's bundled digits, synthetic sets."""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
from torch.utils.data import Dataset, TensorDataset


@cache
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = torch.tensor(digits.data[:320], dtype=torch.float32) / 16.0
    return x, torch.tensor(digits.target[:320], dtype=torch.long)


def digits(start: int = 0, stop: int = 240) -> TensorDataset:
    """Digits ``start:stop`` (of the first 320): 64 features, 10 classes."""
    x, y = _digits()
    return TensorDataset(x[start:stop], y[start:stop])


def regression(n: int = 96, features: int = 6, seed: int = 1) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g)
    y = x @ torch.randn(features, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class Keyed(Dataset[dict[str, Any]]):
    """A dataset of dicts, as Hugging Face datasets and torchvision-style wrappers yield."""

    def __init__(self, base: TensorDataset, x_key: str, y_key: str) -> None:
        self.base, self.x_key, self.y_key = base, x_key, y_key

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, i: int) -> dict[str, Any]:
        x, y = self.base[i]
        return {self.x_key: x, self.y_key: y}


class Tokens(Dataset[dict[str, torch.Tensor]]):
    """Next-token prediction over short random sequences: ``input_ids``, mask, ``labels``."""

    VOCAB, LENGTH = 16, 8

    def __init__(self, n: int = 64, seed: int = 2) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, self.VOCAB, (n, self.LENGTH + 1), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        row = self.ids[i]
        mask = torch.ones(self.LENGTH, dtype=torch.long)
        return {"input_ids": row[:-1], "attention_mask": mask, "labels": row[1:]}


def lightning_options(**kwargs: Any) -> dict[str, Any]:
    """A quiet CPU ``lightning.Trainer``'s options (no logger, checkpoints, bar or summary)."""
    options: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
    }
    return {**options, **kwargs}
