"""K-means over per-sample features, with scikit-learn from the ``explorer`` extra.

Features: the loss, the confidence and the margin (``NaN`` → 0), plus the user's embedding
when a hook gave one; each column is standardised so that none dominates by its scale.
Clusters are numbered by decreasing mean loss: cluster 0 is the highest-loss ("residual")
cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onthefly.errors import ConfigurationError
from onthefly.samples.store import SampleView

EXTRA_HINT = "pip install onthefly-ai[explorer]"


class MissingExtra(ConfigurationError):
    """An optional dependency of the ``explorer`` extra is not installed."""


@dataclass(frozen=True)
class Clusters:
    """Each row's cluster (0 = highest mean loss), and each cluster's size and mean loss."""

    labels: np.ndarray
    sizes: list[int]
    loss_means: list[float]


def features(view: SampleView) -> np.ndarray:
    """The standardised ``[N, F]`` feature matrix of ``view``'s rows."""
    columns = [view.loss, view.confidence, view.margin]
    matrix = np.column_stack([np.nan_to_num(c, nan=0.0) for c in columns])
    if view.embedding is not None:
        matrix = np.hstack([matrix, np.nan_to_num(view.embedding.astype(np.float64))])
    std = matrix.std(axis=0)
    return (matrix - matrix.mean(axis=0)) / np.where(std > 0, std, 1.0)


def kmeans(view: SampleView, k: int, seed: int = 0) -> Clusters:
    """Cluster ``view``'s rows into ``k`` groups.

    Raises:
        MissingExtra: scikit-learn is not installed.
        ConfigurationError: fewer rows than clusters.
    """
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise MissingExtra(
            f"clustering needs scikit-learn, which is not installed; run `{EXTRA_HINT}`"
        ) from None
    if len(view) < k:
        raise ConfigurationError(f"{len(view)} samples cannot form {k} clusters; expected >= {k}")
    raw = KMeans(n_clusters=k, random_state=seed, n_init=4).fit_predict(features(view))
    means = np.array([view.loss[raw == c].mean() for c in range(k)])
    order = np.argsort(-means, kind="stable")
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    labels = rank[raw]
    sizes = [int((labels == c).sum()) for c in range(k)]
    return Clusters(labels, sizes, [float(means[c]) for c in order])
