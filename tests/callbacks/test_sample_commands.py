"""``sample_preview`` over the wire: previews of a run's samples from its own loaders."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import onthefly
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect


def test_previews_of_the_train_and_val_splits_and_the_hook(onthefly_home: Path) -> None:
    images = TensorDataset(torch.rand(32, 1, 12, 12), torch.arange(32) % 2)
    connect = Connect(onthefly_home)
    asks = CommandsAt(
        connect,
        2,
        ("sample_preview", {"indices": [0, 31], "size": 8}),
        ("sample_preview", {"split": "val", "indices": [3]}),
        ("sample_preview", {"indices": [99]}),
    )
    trainer = onthefly.Trainer(
        project="tests",
        max_steps=3,
        device="cpu",
        progress_bar=False,
        port=0,
        quiet=True,
        callbacks=[connect, asks],
        describe_sample=lambda index, split: f"{split} sample {index}" if split == "val" else None,
    )
    model = nn.Sequential(nn.Flatten(), nn.Linear(144, 2))
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=F.cross_entropy,
        train_loader=DataLoader(images, batch_size=8),
        val_loader=DataLoader(images, batch_size=8),
    )
    train, val, missing = (answer["data"] for answer in asks.answers())
    assert [(p["index"], p["kind"], p["label"]) for p in train["previews"]] == [
        (0, "image", 0),
        (31, "image", 1),
    ]
    assert (train["previews"][0]["width"], train["previews"][0]["height"]) == (8, 8)
    assert val == {
        "split": "val",
        "previews": [{"index": 3, "label": 1, "kind": "text", "text": "val sample 3"}],
    }
    (error,) = missing["previews"]
    assert error["kind"] == "error" and "IndexError" in error["text"]
