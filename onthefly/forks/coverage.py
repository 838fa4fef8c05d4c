"""Which classes a fork's slice covers: the warning that a specialist will forget the rest.

A fork trained on a slice of two classes out of ten learns to answer those two everywhere:
on the digits benchmark (docs/forks.md) such a fork alone scores 0.19 test accuracy where
its parent scored 0.77, and every merge but Fisher's lands below the parent. The slice is
*narrow* when 90 % of its samples sit in at most half of the run's classes; the fork is
then told so, with the remedy: replay (:mod:`onthefly.forks.mixing`).
"""

from __future__ import annotations

import numpy as np

CONCENTRATION = 0.9
"""The share of the slice's samples whose classes are counted."""

MIN_CLASSES = 3
"""Runs with fewer classes (binary tasks) are never warned: half of two is one."""


def narrow_slice(slice_labels: np.ndarray, labels: np.ndarray) -> str | None:
    """A warning when the slice covers few of the run's classes, else ``None``.

    Args:
        slice_labels: the label of each of the slice's samples (``NaN`` unknown).
        labels: the labels of the training samples seen so far (``NaN`` unknown).

    Example:
        >>> narrow_slice(np.array([3, 8, 8]), np.arange(10.0)) is not None
        True
    """
    classes = _classes(labels)
    chosen = _classes(slice_labels, unique=False)
    if len(classes) < MIN_CLASSES or not len(chosen):
        return None
    found, counts = np.unique(chosen, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    covering = int(np.searchsorted(np.cumsum(counts[order]), CONCENTRATION * len(chosen))) + 1
    if covering > len(classes) // 2:
        return None
    named = ", ".join(f"{c:g}" for c in sorted(found[order[:covering]]))
    share = counts[order[:covering]].sum() / len(chosen)
    return (
        f"the slice is narrow: {share:.0%} of its {len(chosen)} samples are of {covering} of the "
        f"run's {len(classes)} classes ({named}); a fork trained on it alone forgets the other "
        "classes. Replay mixes batches of the rest of the training set in (replay=0.5)"
    )


def _classes(labels: np.ndarray, unique: bool = True) -> np.ndarray:
    """The known class-index labels (finite integers), distinct when ``unique``."""
    values = np.asarray(labels, dtype=np.float64)
    known = values[np.isfinite(values)]
    known = known[known == np.round(known)]
    return np.unique(known) if unique else known
