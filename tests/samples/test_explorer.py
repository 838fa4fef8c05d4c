"""The 2-D projection of embeddings: PCA without extras, UMAP only when asked and installed."""

from __future__ import annotations

import numpy as np
import pytest

from onthefly.errors import ConfigurationError
from onthefly.samples.explorer import pca_2d, project, subsample
from tests.samples.conftest import make_view


def test_pca_keeps_the_main_direction() -> None:
    rng = np.random.default_rng(0)
    t = rng.normal(size=200)
    points = np.column_stack([t, 2 * t, 0.01 * rng.normal(size=200)])
    xy = pca_2d(points)
    assert abs(np.corrcoef(xy[:, 0], t)[0, 1]) > 0.999


def test_projection_by_pca_subsamples_deterministically() -> None:
    view = make_view(50, embedding=True)
    first = project(view, method="pca", max_points=20)
    again = project(view, method="pca", max_points=20)
    assert first.method == "pca" and len(first.x) == 20 and first.total == 50
    assert first.ids.tolist() == again.ids.tolist()
    assert subsample(5, 10).tolist() == [0, 1, 2, 3, 4]


def test_a_view_without_embeddings_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="embedding hook"):
        project(make_view(10), method="pca")


def test_umap_when_asked_needs_the_extra() -> None:
    try:
        import umap  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigurationError, match=r"onthefly-ai\[explorer\]"):
            project(make_view(10, embedding=True), method="umap")
    else:
        pytest.skip("umap-learn is installed; its slow first fit is not run in unit tests")
