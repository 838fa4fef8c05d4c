"""A Hugging Face style model: dict batches in, an output with ``.loss`` and ``.logits`` out,
the token-level loss computed inside ``forward``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import Tokens, lightning_options

SIZE = 64


@dataclass
class CausalLMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


class TinyLM(nn.Module):
    def __init__(self, vocab: int = Tokens.VOCAB, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.mix = nn.Linear(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor | None
    ) -> CausalLMOutput:
        hidden = torch.tanh(self.mix(self.embed(input_ids))) * attention_mask.unsqueeze(-1)
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss_fct = nn.CrossEntropyLoss()  # made inside forward, as Hugging Face models do
            loss = loss_fct(logits.view(-1, logits.shape[-1]), labels.view(-1))
        return CausalLMOutput(loss, logits)


class LanguageModel(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.model = TinyLM()

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        outputs = self.model(**batch)
        self.log("train_loss", outputs.loss)
        return outputs.loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def main(run: Any) -> LanguageModel:
    model = LanguageModel()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    trainer.fit(model, DataLoader(Tokens(SIZE), batch_size=16, shuffle=True))
    return model
