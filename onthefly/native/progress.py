"""The console progress bar (tqdm): epoch, step and loss.

Reading a loss value is a host-device sync, so the loss text is refreshed at most every
``REFRESH_S`` seconds with a single ``.item()``; between refreshes only counters move.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import torch
from tqdm import tqdm

REFRESH_S = 0.5


class ProgressBar:
    """One tqdm bar per epoch; does nothing when disabled.

    Args:
        enabled: ``False`` (``progress_bar=False``, or a non-zero rank) turns every method into
            a no-op.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: tqdm[Any] | None = None
        self._last_refresh = 0.0

    def start_epoch(self, epoch: int, total: int | None) -> None:
        """Open the bar of ``epoch`` (``total`` batches, ``None`` if unknown)."""
        if not self.enabled:
            return
        self.close()
        self._bar = tqdm(total=total, desc=f"Epoch {epoch}", unit="batch", file=sys.stderr)
        self._last_refresh = 0.0

    def advance(self, step: int, loss: torch.Tensor) -> None:
        """Count one batch; refresh the step and loss text when ``REFRESH_S`` has passed."""
        if self._bar is None:
            return
        now = time.monotonic()
        if now - self._last_refresh >= REFRESH_S:
            self._last_refresh = now
            # Before update(), which redraws: the bar shows the batch it just counted.
            self._bar.set_postfix(step=step, loss=f"{loss.item():.4g}", refresh=False)
        self._bar.update(1)

    def close(self) -> None:
        """Close the current bar, if any."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
