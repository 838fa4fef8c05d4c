"""Answers over a :class:`~onthefly.samples.store.SampleView`, as JSON-ready dicts.

Everything heavy (binning a million losses, sorting a selection) happens here, in numpy,
so that the dashboard only draws: a histogram is ``bins`` counts whatever the split's size.
Non-finite values become ``None`` (JSON has no NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onthefly.errors import ConfigurationError
from onthefly.samples.explorer import subsample
from onthefly.samples.store import SampleView

ROW_COLUMNS = ("index", "loss", "confidence", "variability", "correct", "margin", "count", "label")


def floats(values: np.ndarray) -> list[float | None]:
    """``values`` as a list of floats, ``None`` where not finite."""
    as_float = np.asarray(values, dtype=np.float64)
    out = as_float.astype(object)
    out[~np.isfinite(as_float)] = None
    result: list[float | None] = out.tolist()
    return result


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def header(view: SampleView) -> dict[str, Any]:
    """What every answer says about its data: split, source and step."""
    return {"split": view.split, "source": view.source, "step": view.step}


def histogram(view: SampleView, bins: int, lo: float | None, hi: float | None) -> dict[str, Any]:
    """``bins`` equal-width bins of the finite losses over ``[lo, hi]`` (default: their range).

    Raises:
        ConfigurationError: ``lo`` is not below ``hi``.
    """
    loss = view.loss[np.isfinite(view.loss)]
    data_min = float(loss.min()) if len(loss) else 0.0
    data_max = float(loss.max()) if len(loss) else 1.0
    low = data_min if lo is None else lo
    high = data_max if hi is None else hi
    if lo is not None and hi is not None and lo >= hi:
        raise ConfigurationError(f"histogram range [{lo}, {hi}] is empty; expected min < max")
    if high <= low:  # every loss equal, or one bound given beyond the data: a unit range
        high = low + 1.0
    counts, edges = np.histogram(loss, bins=bins, range=(low, high))
    return {
        **header(view),
        "edges": edges.tolist(),
        "counts": counts.tolist(),
        "total": len(view),
        "below": int((loss < low).sum()),
        "above": int((loss > high).sum()),
        "missing": int(len(view) - len(loss)),
        "min": _finite(data_min) if len(loss) else None,
        "max": _finite(data_max) if len(loss) else None,
        "mean": float(loss.mean()) if len(loss) else None,
    }


def quantiles(view: SampleView, qs: list[float]) -> dict[str, Any]:
    """The losses' quantiles ``qs`` (linear interpolation), with count and mean."""
    loss = view.loss[np.isfinite(view.loss)]
    values = np.quantile(loss, qs).tolist() if len(loss) else [None] * len(qs)
    mean = float(loss.mean()) if len(loss) else None
    return {**header(view), "q": list(qs), "values": values, "count": len(loss), "mean": mean}


def columns(view: SampleView) -> dict[str, np.ndarray]:
    """The table columns of ``view`` by :data:`ROW_COLUMNS` name."""
    return {
        "index": view.ids,
        "loss": view.loss,
        "confidence": view.confidence,
        "variability": view.variability,
        "correct": view.correct,
        "margin": view.margin,
        "count": view.count,
        "label": view.label,
    }


def page(
    view: SampleView, offset: int, limit: int, sort: str, descending: bool
) -> list[dict[str, Any]]:
    """Rows ``offset`` to ``offset + limit`` of ``view`` sorted by ``sort`` (NaN last)."""
    table = columns(view)
    key = np.asarray(table[sort], dtype=np.float64)
    key = np.where(np.isfinite(key), -key if descending else key, np.inf)
    rows = np.argsort(key, kind="stable")[offset : offset + limit]
    listed = {name: floats(values[rows]) for name, values in table.items()}
    listed["index"] = [int(i) for i in view.ids[rows]]
    listed["count"] = [int(c) for c in view.count[rows]]
    return [{name: listed[name][i] for name in ROW_COLUMNS} for i in range(len(rows))]


def data_map(view: SampleView, max_points: int) -> dict[str, Any]:
    """Confidence, variability, correctness and loss per sample (subsampled to ``max_points``)."""
    rows = subsample(len(view), max_points)
    return {
        **header(view),
        "total": len(view),
        "index": view.ids[rows].tolist(),
        "confidence": floats(view.confidence[rows]),
        "variability": floats(view.variability[rows]),
        "correct": floats(view.correct[rows]),
        "loss": floats(view.loss[rows]),
    }


def summary(view: SampleView) -> dict[str, Any]:
    """Size and loss range of ``view``'s rows."""
    loss = view.loss[np.isfinite(view.loss)]
    return {
        "size": len(view),
        "loss_mean": float(loss.mean()) if len(loss) else None,
        "loss_min": float(loss.min()) if len(loss) else None,
        "loss_max": float(loss.max()) if len(loss) else None,
    }
