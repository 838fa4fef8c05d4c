"""Fixtures of the callback tests: a live client connected from inside a Lightning fit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl

from tests.callbacks.live import LiveClient, wait_for_session


class Connect(pl.Callback):
    """Connects a :class:`LiveClient` once OnTheFly opened the session (place it after)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.client: LiveClient | None = None

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        self.client = LiveClient(wait_for_session(self.home, timeout=10))

    def finished(self) -> LiveClient:
        """The client, once it saw the run finish."""
        assert self.client is not None
        self.client.wait_event(lambda e: e["type"] == "status" and e["state"] == "finished")
        return self.client
