"""Benchmarks run in a temporary ONTHEFLY_HOME, like the tests, so no session file leaks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def onthefly_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("otf-home")
    monkeypatch.setenv("ONTHEFLY_HOME", str(home))
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", "0")
    yield home
