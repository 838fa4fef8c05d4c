"""Next-token prediction: ``input_ids``/``attention_mask``/``labels`` batches, per-token
cross-entropy ``[B, V, T]`` against ``[B, T]``, one loss per sequence."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import Tokens

SIZE = 64


class TinyLM(nn.Module):
    def __init__(self, vocab: int = Tokens.VOCAB, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(hidden).transpose(1, 2)  # [B, V, T], as cross_entropy takes it


def main(run: Any) -> TinyLM:
    model = TinyLM()
    trainer = onthefly.Trainer(project="lm", max_epochs=2, **run.native())
    loader = DataLoader(Tokens(SIZE), batch_size=16, shuffle=True)
    trainer.fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), nn.CrossEntropyLoss(), loader)
    return model
