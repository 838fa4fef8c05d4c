"""A VAE returning ``(reconstruction, mu, logvar)``, its loss (BCE + KL) in a custom step."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

import onthefly
from tests.conformance.scripts._data import digits

SIZE = 160
PER_SAMPLE_MEAN = False  # the reconstruction term is captured (summed), not the KL term


class VAE(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(64, 16)
        self.mu, self.logvar = nn.Linear(16, 4), nn.Linear(16, 4)
        self.dec = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 64))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = torch.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.dec(z)), mu, logvar


def main(run: Any) -> VAE:
    model = VAE()
    trainer = onthefly.Trainer(project="vae", max_epochs=2, **run.native())

    @trainer.training_step
    def step(batch: Any, state: Any) -> dict[str, torch.Tensor]:
        x, _ = batch
        recon, mu, logvar = state.model(x)
        bce = F.binary_cross_entropy(recon, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (bce + kld) / x.shape[0]
        state.optimizer.zero_grad()
        state.backward(loss)
        state.optimizer.step()
        return {"loss": loss, "kld": kld.detach() / x.shape[0]}

    loader = DataLoader(digits(0, SIZE), batch_size=32, shuffle=True)
    trainer.fit(model, torch.optim.Adam(model.parameters(), lr=1e-2), None, loader)
    return model
