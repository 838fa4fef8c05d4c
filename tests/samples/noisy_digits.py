"""scikit-learn's bundled digits with planted label noise: the data for the mislabel tests.

1,797 8x8 images of 10 digits (no download: the data ships with scikit-learn). A stratified
split keeps 80 % for training (1,437 images) and 20 % for testing; ``noise`` of the training
labels are flipped to another digit, drawn uniformly. An MLP of one hidden layer (Adam,
``3e-3``, batch 64) fits the clean digits within 40 epochs, still getting the flipped
labels wrong (90 % training accuracy on the noisy labels); by 150 epochs it has memorised
them too (99 %), which is where ranking samples by their latest loss stops finding them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset

LR = 3e-3
"""Adam's learning rate: high enough that long training memorises the noise."""

SHORT_EPOCHS, LONG_EPOCHS = 40, 150
"""Before and well after the network memorises the flipped labels."""


@dataclass(frozen=True)
class NoisyDigits:
    """Training images with their noisy labels, the flipped indices, and a clean test split."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    clean_y: torch.Tensor
    flipped: np.ndarray
    test_x: torch.Tensor
    test_y: torch.Tensor

    @property
    def train(self) -> TensorDataset:
        return TensorDataset(self.train_x, self.train_y)

    @property
    def test(self) -> TensorDataset:
        return TensorDataset(self.test_x, self.test_y)

    def is_flipped(self, ids: np.ndarray) -> np.ndarray:
        """Whether each of the training indices ``ids`` had its label flipped."""
        mask = np.zeros(len(self.train_y), dtype=bool)
        mask[self.flipped] = True
        return mask[np.asarray(ids, dtype=np.int64)]


def make(noise: float = 0.1, seed: int = 0) -> NoisyDigits:
    """The split and the flipped labels, the same for the same arguments."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=seed, stratify=y
    )
    rng = np.random.default_rng(seed)
    count = round(noise * len(y_train))
    flipped = np.sort(rng.choice(len(y_train), count, replace=False))
    noisy = y_train.copy()
    noisy[flipped] = (y_train[flipped] + rng.integers(1, 10, count)) % 10
    return NoisyDigits(
        torch.from_numpy(x_train),
        torch.from_numpy(noisy).long(),
        torch.from_numpy(y_train).long(),
        flipped,
        torch.from_numpy(x_test),
        torch.from_numpy(y_test).long(),
    )


def make_model(seed: int = 0) -> nn.Module:
    """An MLP 64-128-10."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def precision(ids: np.ndarray, data: NoisyDigits) -> float:
    """The share of ``ids`` whose labels were flipped."""
    return float(data.is_flipped(ids).mean()) if len(ids) else 0.0


def recall(ids: np.ndarray, data: NoisyDigits) -> float:
    """The share of the flipped labels that ``ids`` holds."""
    return float(data.is_flipped(ids).sum() / len(data.flipped))
