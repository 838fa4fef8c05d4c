"""Histograms, quantiles, pages and data maps computed over a view."""

from __future__ import annotations

import numpy as np
import pytest

from onthefly.errors import ConfigurationError
from onthefly.samples import queries
from onthefly.samples.store import SampleView
from tests.samples.conftest import make_view


def test_the_histogram_bins_every_loss_once(view: SampleView) -> None:
    answer = queries.histogram(view, bins=10, lo=None, hi=None)
    assert sum(answer["counts"]) == 100 and len(answer["edges"]) == 11
    assert answer["min"] == 0.0 and answer["max"] == pytest.approx(9.9)
    ranged = queries.histogram(view, bins=4, lo=2.0, hi=6.0)
    assert ranged["below"] == 20 and ranged["above"] == 39
    with pytest.raises(ConfigurationError, match="expected min < max"):
        queries.histogram(view, 4, 3.0, 3.0)


def test_a_million_losses_bin_into_a_small_answer() -> None:
    big = make_view(1_000_000)
    answer = queries.histogram(big, bins=50, lo=None, hi=None)
    assert sum(answer["counts"]) == 1_000_000 and len(answer["counts"]) == 50


def test_quantiles_and_missing_values(view: SampleView) -> None:
    view.loss[0] = np.nan
    answer = queries.quantiles(view, [0.0, 0.5, 1.0])
    assert answer["values"][0] == pytest.approx(0.1) and answer["values"][2] == pytest.approx(9.9)
    assert answer["count"] == 99
    assert queries.histogram(view, 5, None, None)["missing"] == 1


def test_pages_sort_with_missing_values_last(view: SampleView) -> None:
    view.margin[5] = np.nan
    rows = queries.page(view, offset=0, limit=3, sort="margin", descending=True)
    assert [r["index"] for r in rows] == [0, 2, 4]
    last = queries.page(view, offset=99, limit=5, sort="margin", descending=False)
    assert last[0]["index"] == 10 and last[0]["margin"] is None
    assert set(rows[0]) == set(queries.ROW_COLUMNS)


def test_the_data_map_is_subsampled(view: SampleView) -> None:
    answer = queries.data_map(view, max_points=10)
    assert answer["total"] == 100 and len(answer["confidence"]) == 10
    assert answer["source"] == "training" and answer["step"] == 7
