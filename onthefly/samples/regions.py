"""Data-map regions (Dataset Cartography, Swayamdipta et al. 2020) and boxes on the data map.

The data map places every training sample at its *confidence* (the mean over training of the
probability the model gives its label) and its *variability* (the standard deviation of that
probability). The regions are rankings of those two numbers, each taking a share of the
samples:

* ``easy`` — the highest confidence (ties: lower variability first). High confidence bounds
  the variability from above, so these are the high-confidence, low-variability samples;
* ``ambiguous`` — the highest variability (ties: higher confidence first);
* ``hard`` — the lowest confidence (ties: lower variability first): the hard-to-learn
  samples. Low confidence bounds the variability too, so the region is mostly
  low-variability, but it is never cut by variability: a mislabeled sample that the network
  ends up memorising has a high variability *and* a low mean confidence, and must stay here;
* ``mislabeled`` — the ranking that finds flipped labels: the lowest confidence, or with
  ``with_correctness`` the lowest mean of confidence and correctness (the share of training
  passes that predicted the label). Without a size it takes the low group of a two-class
  split of the ranking key (Otsu's threshold): an estimate of how many samples are
  mislabeled, which needs no noise rate.

As in the paper, the regions are independent rankings: at their edges they may overlap (a
sample among the least confident third can be among the most variable third as well).

A *box* is the samples whose confidence and variability fall within bounds (any bound open):
what a rectangle drawn on the data map holds.
"""

from __future__ import annotations

import math

import numpy as np

from onthefly.errors import ConfigurationError
from onthefly.samples.store import SampleView

REGIONS = ("easy", "ambiguous", "hard", "mislabeled")

DEFAULT_FRACTION = 1 / 3
"""The share of the samples a region takes by default (``mislabeled``: the estimated count)."""


def region_rows(
    view: SampleView,
    region: str,
    fraction: float | None = None,
    size: int | None = None,
    with_correctness: bool = False,
) -> np.ndarray:
    """The rows of ``view`` in ``region``, most typical of the region first.

    Args:
        view: the train split's training statistics.
        region: one of :data:`REGIONS`.
        fraction: the share of the samples on the data map it takes (at least one sample).
        size: instead of ``fraction``, exactly this many samples (at most all of them).
        with_correctness: ``mislabeled``: rank by the mean of confidence and correctness.

    Raises:
        ConfigurationError: an unknown region, both ``fraction`` and ``size``, or a view
            without training dynamics or with fewer than 3 samples on the data map.

    Example:
        >>> rows = region_rows(view, "mislabeled", size=100)  # doctest: +SKIP
    """
    if region not in REGIONS:
        raise ConfigurationError(f"region={region!r}; expected one of {', '.join(REGIONS)}")
    if fraction is not None and size is not None:
        raise ConfigurationError("a region takes a fraction or a size; expected one of them")
    rows = mapped_rows(view)
    confidence, variability = view.confidence[rows], view.variability[rows]
    if region == "easy":
        order = np.lexsort((variability, -confidence))
    elif region == "ambiguous":
        order = np.lexsort((-confidence, -variability))
    elif region == "hard":
        order = np.lexsort((variability, confidence))
    else:
        key = suspicion(view, with_correctness)[rows]
        order = np.lexsort((variability, key))
        if size is None and fraction is None:
            size = low_group_size(key)
    if size is None:
        share = DEFAULT_FRACTION if fraction is None else fraction
        size = max(1, round(share * len(rows)))
    return rows[order[:size]]


def box_rows(
    view: SampleView,
    confidence: tuple[float | None, float | None],
    variability: tuple[float | None, float | None],
) -> np.ndarray:
    """The rows of ``view`` whose confidence and variability lie within the given closed
    ranges (``None``: that side open), highest loss first.

    Raises:
        ConfigurationError: an empty range, or a view without training dynamics.
    """
    for name, (lo, hi) in (("confidence", confidence), ("variability", variability)):
        if lo is not None and hi is not None and lo > hi:
            raise ConfigurationError(f"{name} range [{lo}, {hi}] is empty; expected min <= max")
    rows = mapped_rows(view)
    inside = np.ones(len(rows), dtype=bool)
    for values, (lo, hi) in (
        (view.confidence[rows], confidence),
        (view.variability[rows], variability),
    ):
        if lo is not None:
            inside &= values >= lo
        if hi is not None:
            inside &= values <= hi
    chosen = rows[inside]
    return chosen[np.argsort(-np.nan_to_num(view.loss[chosen], nan=-np.inf), kind="stable")]


def mapped_rows(view: SampleView) -> np.ndarray:
    """The rows that have a place on the data map (finite confidence and variability).

    Raises:
        ConfigurationError: ``view`` is not training statistics, or fewer than 3 such rows.
    """
    if view.source != "training":
        raise ConfigurationError(
            "data-map regions need training dynamics; expected split='train' with the training "
            "source (a scan sees each sample once)"
        )
    rows = np.flatnonzero(np.isfinite(view.variability) & np.isfinite(view.confidence))
    if len(rows) < 3:
        raise ConfigurationError("the data map needs at least 3 samples seen in training")
    return rows


def suspicion(view: SampleView, with_correctness: bool) -> np.ndarray:
    """The ``mislabeled`` ranking key of every row: lower is more likely mislabeled."""
    if not with_correctness:
        return view.confidence
    known = np.isfinite(view.correct)
    return np.where(known, (view.confidence + view.correct) / 2, view.confidence)


def low_group_size(values: np.ndarray) -> int:
    """How many of ``values`` fall in the lower group of Otsu's two-class split.

    The split point maximises the between-group variance ``w0 w1 (m0 - m1)^2`` over every
    cut of the sorted values (exact, no histogram). Mislabeled samples stay far below the
    clean ones in mean confidence even once the network memorises them, so the lower group
    estimates their number. Fewer than 2 distinct values: no split, 1.
    """
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    n = len(ordered)
    if n < 2 or ordered[0] == ordered[-1]:
        return 1
    below = np.cumsum(ordered)[:-1]
    counts = np.arange(1, n)
    mean_low = below / counts
    mean_high = (ordered.sum() - below) / (n - counts)
    between = counts * (n - counts) * (mean_low - mean_high) ** 2
    between[ordered[:-1] == ordered[1:]] = -math.inf  # never split between equal values
    return int(np.argmax(between)) + 1
