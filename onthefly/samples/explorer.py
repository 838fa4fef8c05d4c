"""The data explorer: a 2-D map of the samples' embeddings, coloured by loss.

The embeddings come from the latest scan of a split (the user's embedding hook, else the
model's outputs when they are small). UMAP (``umap-learn``, from the ``explorer`` extra)
projects them when it is installed; otherwise PCA does (an SVD with numpy, no extra needed).
Large splits are subsampled, deterministically, to ``max_points`` before projecting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from onthefly.errors import ConfigurationError
from onthefly.samples.clustering import EXTRA_HINT, MissingExtra
from onthefly.samples.store import SampleView

Method = Literal["auto", "umap", "pca"]


@dataclass(frozen=True)
class Projection:
    """``x``/``y`` of each sampled row, its id and loss, and the method used."""

    method: str
    ids: np.ndarray
    x: np.ndarray
    y: np.ndarray
    loss: np.ndarray
    total: int


def subsample(n: int, max_points: int, seed: int = 0) -> np.ndarray:
    """Sorted positions of at most ``max_points`` of ``n`` rows (all of them when few)."""
    if n <= max_points:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_points, replace=False))


def pca_2d(points: np.ndarray) -> np.ndarray:
    """The first two principal components of ``points`` (``[N, D]``), as ``[N, 2]``."""
    centred = points - points.mean(axis=0)
    if centred.shape[1] == 1:
        return np.column_stack([centred[:, 0], np.zeros(len(centred))])
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def _umap_2d(points: np.ndarray, seed: int) -> np.ndarray:
    import umap

    reducer = umap.UMAP(n_components=2, random_state=seed)
    return np.asarray(reducer.fit_transform(points))


def _umap_available() -> bool:
    try:
        import umap  # noqa: F401
    except ImportError:
        return False
    return True


def project(view: SampleView, method: Method = "auto", max_points: int = 20_000) -> Projection:
    """Project ``view``'s embeddings to 2-D.

    Args:
        view: a scan's view (it carries the embeddings).
        method: ``"umap"``, ``"pca"``, or ``"auto"`` (UMAP when installed, else PCA).
        max_points: rows projected at most (a deterministic subsample above that).

    Raises:
        ConfigurationError: the view has no embeddings.
        MissingExtra: ``method="umap"`` without umap-learn.
    """
    if view.embedding is None:
        raise ConfigurationError(
            f"the {view.split} data has no embeddings; scan it with an embedding hook "
            "(embedding_fn=) or a model whose outputs have at most 256 values per sample"
        )
    use_umap = method == "umap" or (method == "auto" and _umap_available())
    if method == "umap" and not _umap_available():
        raise MissingExtra(f"the UMAP projection needs umap-learn; run `{EXTRA_HINT}`")
    rows = subsample(len(view), max_points)
    points = np.nan_to_num(view.embedding[rows].astype(np.float64))
    if use_umap and len(rows) > 3:
        xy, used = _umap_2d(points, seed=0), "umap"
    else:
        xy, used = pca_2d(points), "pca"
    return Projection(used, view.ids[rows], xy[:, 0], xy[:, 1], view.loss[rows], len(view))
