"""OnTheFly from a LightningCLI config: the callback is listed in the YAML, no code change.

::

    python examples/lightning_cli.py fit --config examples/lightning_cli.yaml
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.cli import LightningCLI
from torch.utils.data import DataLoader

# The model and data of the quickstart, next to this file (examples/ is not a package).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from lightning_quickstart import Classifier, two_moons


class TwoMoons(pl.LightningDataModule):
    def __init__(self, batch_size: int = 64, samples: int = 4096) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.samples = samples

    def train_dataloader(self) -> DataLoader[Any]:
        return DataLoader(two_moons(self.samples, 0), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader[Any]:
        return DataLoader(two_moons(512, 1), batch_size=256)

    def test_dataloader(self) -> DataLoader[Any]:
        return DataLoader(two_moons(512, 2), batch_size=256)


def main(args: list[str] | None = None, run: bool = True) -> LightningCLI:
    """Build the CLI (``args`` as on the command line; ``None`` reads ``sys.argv``)."""
    return LightningCLI(Classifier, TwoMoons, args=args, run=run, save_config_callback=None)


if __name__ == "__main__":
    main()
