"""Selections: named, reusable sets of samples of a run (hard samples, a tail, a cluster).

A selection is made from one split's :class:`~onthefly.samples.store.SampleView` by one
criterion and keeps the samples' ids (dataset indices), highest loss first (a region: in its
ranking's order). Criteria:

* ``top`` — the ``k`` highest losses;
* ``range`` — losses in ``[loss_min, loss_max]`` (either bound may be open);
* ``quantile`` — losses at or above the ``q``-quantile (the upper tail);
* ``region`` — a data-map region, ``easy``, ``ambiguous``, ``hard`` or ``mislabeled``
  (:mod:`~onthefly.samples.regions`; needs training dynamics, i.e. the train split's training
  source), ranked most typical first;
* ``box`` — the samples within bounds of confidence and variability (a rectangle drawn on
  the data map);
* ``cluster`` — cluster ``cluster`` of a ``k``-means over loss, confidence, margin (and the
  user's embedding), numbered by decreasing mean loss.

:func:`indices` gives a selection's ids by name, for features that reuse it (e.g. forks).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from onthefly.errors import ConfigurationError
from onthefly.samples import clustering
from onthefly.samples.regions import box_rows, region_rows
from onthefly.samples.store import SampleView

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
"""A selection's name: also the default export file name, so no path separators."""


@dataclass(frozen=True)
class Criterion:
    """How samples are chosen; ``kind`` says which of the other fields apply."""

    kind: str
    k: int | None = None
    loss_min: float | None = None
    loss_max: float | None = None
    q: float | None = None
    region: str | None = None
    fraction: float | None = None
    size: int | None = None
    with_correctness: bool = False
    confidence: tuple[float | None, float | None] = (None, None)
    variability: tuple[float | None, float | None] = (None, None)
    cluster: int = 0

    def describe(self) -> dict[str, Any]:
        """The criterion's fields that apply, as JSON-ready values."""
        if self.kind == "box":
            (c0, c1), (v0, v1) = self.confidence, self.variability
            bounds = {"confidence_min": c0, "confidence_max": c1}
            return {"kind": "box", **bounds, "variability_min": v0, "variability_max": v1}
        fields = {
            "top": ("k",),
            "range": ("loss_min", "loss_max"),
            "quantile": ("q",),
            "region": ("region", "fraction", "size", "with_correctness"),
            "cluster": ("k", "cluster"),
        }[self.kind]
        return {"kind": self.kind, **{name: getattr(self, name) for name in fields}}

    def default_name(self) -> str:
        if self.kind == "top":
            return f"top-{self.k}"
        if self.kind == "range":
            return f"loss-{_num(self.loss_min)}-{_num(self.loss_max)}"
        if self.kind == "quantile":
            return f"q{_num(self.q)}"
        if self.kind == "region":
            return str(self.region)
        if self.kind == "box":
            (c0, c1), (v0, v1) = self.confidence, self.variability
            return f"box-c{_num(c0)}-{_num(c1)}-v{_num(v0)}-{_num(v1)}"
        return f"cluster-{self.cluster}-of-{self.k}"


def _num(value: float | None) -> str:
    return "open" if value is None else f"{value:g}"


@dataclass
class Selection:
    """A named set of samples of one split.

    Attributes:
        name: unique within the run.
        split: the split the ids belong to.
        source: ``"training"`` or ``"scan"``: the data it was chosen from.
        step: the step of that data.
        criterion: how it was chosen.
        ids: the samples' ids (dataset indices), highest loss first.
        created: Unix time of its creation.
    """

    name: str
    split: str
    source: str
    step: int
    criterion: dict[str, Any]
    ids: np.ndarray
    created: float = field(default_factory=time.time)

    def summary(self) -> dict[str, Any]:
        """The selection without its ids, as command replies carry it."""
        return {
            "name": self.name,
            "split": self.split,
            "source": self.source,
            "step": self.step,
            "criterion": self.criterion,
            "size": len(self.ids),
            "created": self.created,
        }

    def state_dict(self) -> dict[str, Any]:
        state = self.summary()
        del state["size"]
        state["ids"] = torch.from_numpy(self.ids.astype(np.int64))
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Selection:
        return cls(
            name=str(state["name"]),
            split=str(state["split"]),
            source=str(state["source"]),
            step=int(state["step"]),
            criterion=dict(state["criterion"]),
            ids=state["ids"].numpy().copy(),
            created=float(state["created"]),
        )


def choose(view: SampleView, criterion: Criterion) -> tuple[np.ndarray, dict[str, Any]]:
    """The rows of ``view`` that ``criterion`` picks, highest loss first, and extra facts.

    Raises:
        ConfigurationError: the criterion does not apply to this view.
        clustering.MissingExtra: a cluster criterion without scikit-learn.
    """
    loss = view.loss
    finite = np.isfinite(loss)
    extra: dict[str, Any] = {}
    if criterion.kind == "top":
        assert criterion.k is not None
        rows = np.flatnonzero(finite)
        rows = rows[np.argsort(-loss[rows], kind="stable")][: criterion.k]
        return rows, extra
    if criterion.kind == "range":
        lo = -np.inf if criterion.loss_min is None else criterion.loss_min
        hi = np.inf if criterion.loss_max is None else criterion.loss_max
        mask = finite & (loss >= lo) & (loss <= hi)
    elif criterion.kind == "quantile":
        if not finite.any():
            raise ConfigurationError(f"the {view.split} split has no finite loss to rank")
        assert criterion.q is not None
        threshold = float(np.quantile(loss[finite], criterion.q))
        extra["threshold"] = threshold
        mask = finite & (loss >= threshold)
    elif criterion.kind == "region":
        ranked = region_rows(
            view,
            str(criterion.region),
            criterion.fraction,
            criterion.size,
            criterion.with_correctness,
        )
        return ranked, extra
    elif criterion.kind == "box":
        return box_rows(view, criterion.confidence, criterion.variability), extra
    elif criterion.kind == "cluster":
        assert criterion.k is not None
        if not 0 <= criterion.cluster < criterion.k:
            raise ConfigurationError(
                f"cluster={criterion.cluster}; expected 0 <= cluster < k={criterion.k}"
            )
        found = clustering.kmeans(view, criterion.k)
        extra["clusters"] = [
            {"cluster": c, "size": size, "loss_mean": mean}
            for c, (size, mean) in enumerate(zip(found.sizes, found.loss_means, strict=True))
        ]
        mask = found.labels == criterion.cluster
    else:
        raise ConfigurationError(
            f"unknown criterion {criterion.kind!r}; expected top, range, quantile, region, box "
            "or cluster"
        )
    rows = np.flatnonzero(mask)
    return rows[np.argsort(-np.nan_to_num(loss[rows], nan=-np.inf), kind="stable")], extra


class Selections:
    """The run's selections by name.

    Example:
        >>> selections = Selections()
        >>> selections.add(Selection("tail", "val", "scan", 10, {"kind": "quantile"},
        ...                          np.array([7, 3])))
        >>> selections.indices("tail")
        [7, 3]
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Selection] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def add(self, selection: Selection) -> None:
        """Add or replace the selection of that name.

        Raises:
            ConfigurationError: the name is not a valid selection name.
        """
        check_name(selection.name)
        self._by_name[selection.name] = selection

    def get(self, name: str) -> Selection:
        """The selection called ``name``.

        Raises:
            ConfigurationError: there is none.
        """
        try:
            return self._by_name[name]
        except KeyError:
            known = ", ".join(sorted(self._by_name)) or "none yet"
            raise ConfigurationError(
                f"no selection named {name!r}; expected one of: {known}"
            ) from None

    def indices(self, name: str) -> list[int]:
        """The dataset indices of the selection ``name``, highest loss first."""
        return [int(i) for i in self.get(name).ids]

    def summaries(self) -> list[dict[str, Any]]:
        return [s.summary() for s in self._by_name.values()]

    def state_dict(self) -> dict[str, Any]:
        return {name: s.state_dict() for name, s in self._by_name.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._by_name = {name: Selection.from_state(s) for name, s in state.items()}


def check_name(name: str) -> str:
    """``name`` if it is a valid selection name.

    Raises:
        ConfigurationError: otherwise (what a valid name looks like).
    """
    if not isinstance(name, str) or not NAME.match(name):
        raise ConfigurationError(
            f"selection name {name!r} is invalid; expected 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name
