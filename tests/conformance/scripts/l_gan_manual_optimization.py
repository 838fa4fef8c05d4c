"""A GAN with manual optimization and two optimizers (Lightning's basic GAN example)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from tests.conformance.scripts._data import digits, lightning_options

PER_SAMPLE = False  # the first loss is the generator's, on generated samples


class GAN(pl.LightningModule):
    def __init__(self, latent: int = 8) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.latent = latent
        self.generator = nn.Sequential(nn.Linear(latent, 32), nn.ReLU(), nn.Linear(32, 64))
        self.discriminator = nn.Sequential(nn.Linear(64, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def training_step(self, batch: Any, batch_idx: int) -> None:
        real, _ = batch
        g_opt, d_opt = self.optimizers()
        z = torch.randn(real.shape[0], self.latent)
        fake = torch.sigmoid(self.generator(z))
        ones, zeros = torch.ones(real.shape[0], 1), torch.zeros(real.shape[0], 1)

        g_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake), ones)
        g_opt.zero_grad()
        self.manual_backward(g_loss)
        g_opt.step()

        real_loss = F.binary_cross_entropy_with_logits(self.discriminator(real), ones)
        fake_loss = F.binary_cross_entropy_with_logits(self.discriminator(fake.detach()), zeros)
        d_loss = (real_loss + fake_loss) / 2
        d_opt.zero_grad()
        self.manual_backward(d_loss)
        d_opt.step()
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss})

    def configure_optimizers(self) -> Any:
        g = torch.optim.Adam(self.generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
        d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))
        return [g, d]


def main(run: Any) -> GAN:
    model = GAN()
    trainer = pl.Trainer(**lightning_options(max_epochs=2, callbacks=run.callbacks()))
    trainer.fit(model, DataLoader(digits(0, 128), batch_size=32, shuffle=True))
    return model
