"""Compact metric history and min/max decimation.

Each series keeps its steps in an ``array('q')`` and its values in an ``array('d')``
(``None`` is stored as NaN), so a million points cost 16 MB and no Python objects.
Reading is two steps: :meth:`SeriesStore.window` copies the points of a step range
(cheap, done under the broker's lock) and :func:`decimate` reduces the copy to at most
``max_points`` points (done outside the lock).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from onthefly.protocol import Series


class Window(NamedTuple):
    """A copy of consecutive points of one series, in step order."""

    steps: array  # array('q')
    values: array  # array('d'); NaN where the value was None
    has_gaps: bool  # the series holds a NaN somewhere (min/max must then skip them)


class _Points:
    """One metric of one split: parallel step/value arrays kept in step order."""

    __slots__ = ("nan_count", "steps", "values")

    def __init__(self) -> None:
        self.steps = array("q")
        self.values = array("d")
        self.nan_count = 0

    def add(self, step: int, value: float) -> None:
        if math.isnan(value):
            self.nan_count += 1
        if not self.steps or step >= self.steps[-1]:
            self.steps.append(step)
            self.values.append(value)
            return
        # Out-of-order steps are rare (a resumed run re-logging a step); keep the order.
        index = bisect_right(self.steps, step)
        self.steps.insert(index, step)
        self.values.insert(index, value)

    def extend(self, steps: Sequence[int], values: Sequence[float | None]) -> None:
        """Append values at ``steps`` (in step order; ``None`` is a gap): one array call
        each, unless the batch starts before the last step kept."""
        if self.steps and steps and steps[0] < self.steps[-1]:
            for step, value in zip(steps, values, strict=True):  # rare: out of order
                self.add(step, math.nan if value is None else float(value))
            return
        floats = [math.nan if value is None else value for value in values]
        self.nan_count += sum([value != value for value in floats])
        self.steps.extend(steps)
        self.values.extend(floats)


class SeriesStore:
    """Every metric series of one run, keyed by ``(split, name)``.

    Not thread-safe: the broker serialises writers and readers with its lock.

    Example:
        >>> store = SeriesStore()
        >>> store.add("train", 1, {"loss": 0.9})
        >>> window = store.window("train", "loss")
        >>> list(window.steps), list(window.values)
        ([1], [0.9])
    """

    def __init__(self) -> None:
        self._points: dict[tuple[str, str], _Points] = {}

    def add(self, split: str, step: int, values: Mapping[str, float | None]) -> None:
        """Append one step's values of ``split``; ``None`` is kept as a gap."""
        for name, value in values.items():
            self._series(split, name).add(step, math.nan if value is None else float(value))

    def add_points(
        self, split: str, name: str, steps: Sequence[int], values: Sequence[float | None]
    ) -> None:
        """Append one metric's values at ``steps`` (in step order); ``None`` is kept as a gap."""
        self._series(split, name).extend(steps, values)

    def _series(self, split: str, name: str) -> _Points:
        points = self._points.get((split, name))
        if points is None:
            points = self._points[(split, name)] = _Points()
        return points

    def names(self) -> list[tuple[str, str]]:
        """The ``(split, name)`` of every series, in order of first appearance."""
        return list(self._points)

    def window(
        self, split: str, name: str, start: int | None = None, end: int | None = None
    ) -> Window:
        """A copy of the points with ``start <= step <= end`` (bounds are optional).

        An unknown series gives empty arrays.
        """
        points = self._points.get((split, name))
        if points is None:
            return Window(array("q"), array("d"), False)
        lo = 0 if start is None else bisect_left(points.steps, start)
        hi = len(points.steps) if end is None else bisect_right(points.steps, end)
        return Window(points.steps[lo:hi], points.values[lo:hi], points.nan_count > 0)


def decimate(window: Window, max_points: int | None = None) -> Series:
    """Reduce a window to at most ``max_points`` points that keep its visual envelope.

    The first and last points are always kept. The points between them are cut into
    equal buckets and each bucket contributes its minimum and its maximum, in step order,
    so spikes survive any zoom level. NaN values are ignored for min/max and sent as
    ``None``.

    Args:
        window: steps and values as returned by :meth:`SeriesStore.window`.
        max_points: the most points to return; ``None`` returns every point.

    Raises:
        ValueError: ``max_points`` is below 2.

    Example:
        >>> from array import array
        >>> values = array("d", [0, 5, 1, 1, 1, 1, 1, 9, 1, 0])
        >>> series = decimate(Window(array("q", range(10)), values, False), 6)
        >>> series.steps, series.values
        ([0, 1, 2, 5, 7, 9], [0.0, 5.0, 1.0, 1.0, 9.0, 0.0])
    """
    steps, values, has_gaps = window
    if max_points is not None and max_points < 2:
        raise ValueError(f"max_points must be at least 2, got {max_points}")
    if max_points is None or len(steps) <= max_points:
        return Series(steps=list(steps), values=_with_gaps(values), decimated=False)
    buckets = (max_points - 2) // 2
    keep = [0, *_bucket_extremes(values, 1, len(values) - 1, buckets, has_gaps)]
    keep.append(len(values) - 1)
    return Series(
        steps=[steps[i] for i in keep],
        values=_with_gaps(values[i] for i in keep),
        decimated=True,
    )


def _bucket_extremes(values: array, lo: int, hi: int, buckets: int, has_gaps: bool) -> list[int]:
    """Indices of each bucket's min and max over ``values[lo:hi]``, in index order."""
    kept: list[int] = []
    count = hi - lo
    if buckets <= 0 or count <= 0:
        return kept
    for b in range(buckets):
        a = lo + b * count // buckets
        z = lo + (b + 1) * count // buckets
        if a >= z:
            continue
        chunk = values[a:z]
        # min()/max() over the raw array run in C; only series with gaps pay for a filter.
        finite = [v for v in chunk if not math.isnan(v)] if has_gaps else chunk
        if not finite:
            kept.append(a)  # an all-gap bucket still shows as a gap
            continue
        i_min = a + chunk.index(min(finite))
        i_max = a + chunk.index(max(finite))
        kept.extend(sorted({i_min, i_max}))
    return kept


def _with_gaps(values: Iterable[float]) -> list[float | None]:
    return [None if math.isnan(v) else v for v in values]
