"""Views with known losses for the selection, query, export and explorer tests."""

from __future__ import annotations

import numpy as np
import pytest

from onthefly.samples.store import SampleView


def make_view(n: int = 100, source: str = "training", embedding: bool = False) -> SampleView:
    """Sample ``i`` has loss ``i / 10``; confidence and variability are simple functions of i."""
    ids = np.arange(n, dtype=np.int64) * 2  # ids differ from row positions on purpose
    loss = np.arange(n, dtype=np.float64) / 10
    rng = np.random.default_rng(0)
    return SampleView(
        split="train",
        source=source,  # type: ignore[arg-type]
        step=7,
        ids=ids,
        loss=loss,
        confidence=np.exp(-loss),
        variability=rng.random(n) * 0.2,
        correct=(loss < 5).astype(np.float64),
        margin=5 - loss,
        label=(np.arange(n) % 3).astype(np.float64),
        count=np.full(n, 3, dtype=np.int64),
        embedding=rng.normal(size=(n, 4)).astype(np.float32) if embedding else None,
    )


@pytest.fixture
def view() -> SampleView:
    return make_view()
