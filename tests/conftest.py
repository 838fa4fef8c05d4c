"""Shared fixtures: small models run on one CPU thread; every session lives in a tmp home;
no test leaves worker processes behind."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# `make test` draws the same property-test examples on every machine and at every run
# (derandomized), with no per-example time limit (these machines' speed varies): a red run
# is then one that any machine reproduces. `HYPOTHESIS_PROFILE=explore` draws new examples
# (Hypothesis's defaults); keep a failure it finds as an `@example`.
settings.register_profile("repeatable", derandomize=True, deadline=None)
settings.register_profile("explore")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture(autouse=True)
def onthefly_home(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Each test gets its own ONTHEFLY_HOME so discovery files never leak between tests."""
    home = tmp_path_factory.mktemp("otf-home")
    monkeypatch.setenv("ONTHEFLY_HOME", str(home))
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", "0")
    yield home


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    try:
        import torch
    except ImportError:  # the CLI tests run without torch imported
        return
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _no_leftover_workers() -> Iterator[None]:
    """DataLoader workers left alive by a run stall a later garbage collection for seconds
    per worker, on whatever thread it runs (a server thread of another test included)."""
    yield
    left = multiprocessing.active_children()
    assert not left, f"worker processes still alive after the test: {left}"
