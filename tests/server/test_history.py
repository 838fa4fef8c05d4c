"""Series storage and min/max decimation."""

from __future__ import annotations

import math
import random
from array import array

import pytest

from onthefly.server.history import SeriesStore, Window, decimate


def _window(values: list[float]) -> Window:
    return Window(array("q", range(len(values))), array("d", values), any(map(math.isnan, values)))


def test_store_keeps_points_per_split_and_metric_in_step_order() -> None:
    store = SeriesStore()
    store.add("train", 1, {"loss": 1.0, "lr": 0.1})
    store.add("train", 3, {"loss": 0.5})
    store.add("val", 2, {"loss": 0.7})
    store.add("train", 2, {"loss": 0.8})  # out of order: inserted at its place
    window = store.window("train", "loss")
    assert list(window.steps) == [1, 2, 3]
    assert list(window.values) == [1.0, 0.8, 0.5]
    assert list(store.window("val", "loss").values) == [0.7]
    assert store.names() == [("train", "loss"), ("train", "lr"), ("val", "loss")]


def test_window_is_an_inclusive_step_range_and_a_copy() -> None:
    store = SeriesStore()
    for step in range(10):
        store.add("train", step, {"loss": float(step)})
    window = store.window("train", "loss", start=3, end=6)
    assert list(window.steps) == [3, 4, 5, 6]
    store.add("train", 10, {"loss": 10.0})
    assert list(window.steps) == [3, 4, 5, 6]
    assert len(store.window("train", "missing").steps) == 0


def test_none_is_stored_as_a_gap_and_sent_as_none() -> None:
    store = SeriesStore()
    store.add("train", 0, {"loss": None})
    store.add("train", 1, {"loss": 2.0})
    series = decimate(store.window("train", "loss"))
    assert series.values == [None, 2.0]
    assert not series.decimated


def test_small_windows_are_returned_at_full_resolution() -> None:
    series = decimate(_window([3.0, 1.0, 2.0]), max_points=3)
    assert series.steps == [0, 1, 2]
    assert not series.decimated


def test_decimation_keeps_first_last_and_each_bucket_min_and_max() -> None:
    rng = random.Random(1)
    values = [rng.uniform(-1, 1) for _ in range(10_000)]
    values[1234] = 50.0  # a spike
    values[8765] = -50.0  # a dip
    series = decimate(_window(values), max_points=100)
    assert series.decimated
    assert len(series.steps) <= 100
    assert series.steps[0] == 0 and series.steps[-1] == 9_999
    assert series.steps == sorted(series.steps)
    assert 1234 in series.steps and 8765 in series.steps
    # Every kept interior point is the min or the max of its bucket.
    buckets, lo, count = 49, 1, 9_998
    for b in range(buckets):
        chunk = values[lo + b * count // buckets : lo + (b + 1) * count // buckets]
        kept = [v for v in series.values if v in chunk]
        assert min(chunk) in kept and max(chunk) in kept


def test_decimation_skips_gaps_for_min_and_max() -> None:
    values = [0.0, math.nan, 5.0, math.nan, -5.0, math.nan, math.nan, math.nan, math.nan, 1.0]
    series = decimate(_window(values), max_points=6)
    assert series.values[0] == 0.0 and series.values[-1] == 1.0
    assert 5.0 in series.values and -5.0 in series.values
    assert None in series.values  # the all-gap bucket shows as a gap


def test_zoomed_range_comes_back_at_full_resolution() -> None:
    store = SeriesStore()
    for step in range(100_000):
        store.add("train", step, {"loss": math.sin(step)})
    overview = decimate(store.window("train", "loss"), max_points=1000)
    zoom = decimate(store.window("train", "loss", start=500, end=900), max_points=1000)
    assert overview.decimated and len(overview.steps) <= 1000
    assert not zoom.decimated
    assert zoom.steps == list(range(500, 901))


def test_max_points_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        decimate(_window([1.0, 2.0, 3.0]), max_points=1)
