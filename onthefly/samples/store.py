"""What a run knows about each sample: O(dataset size) arrays, never O(steps x batch).

:class:`TrainingStats` folds every training observation into per-sample running values —
latest loss, step and epoch last seen, count, the sums of the loss and of its square, the
same of the gold-label probability ``p = exp(-loss)`` (their means and spreads are the data
map's *confidence* and *variability*), and correctness where the loss has class targets.
A fold is a fixed number of NumPy operations whatever the chunk holds: the sums are taken
with ``np.add.at``, which adds a sample seen several times in order, one observation after
the other, so the result does not depend on where chunks begin and end (a resumed run that
ships its values at other moments ends with exactly the same numbers); the latest values
are those of each sample's last observation. Large chunks fold in a few long operations:
the sample tracker's history thread folds them, off the training thread.
:class:`ScanResult` holds one full pass over a split. :class:`SampleStore` keeps both and
answers with a :class:`SampleView`, the common shape every query reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from onthefly.samples.buffer import Chunk

Source = Literal["training", "scan"]

_STATS: tuple[str, ...] = ("count", "loss_last", "step_last", "epoch_last", "loss_sum")
_STATS += ("loss_sq", "conf_sum", "conf_sq", "correct_sum", "correct_count", "label")
_DTYPES: dict[str, Any] = {
    "count": np.int64,
    "loss_last": np.float32,
    "step_last": np.int64,
    "epoch_last": np.int64,
    "loss_sum": np.float64,
    "loss_sq": np.float64,
    "conf_sum": np.float64,
    "conf_sq": np.float64,
    "correct_sum": np.float64,
    "correct_count": np.int64,
    "label": np.float64,
}
_MOMENTS = {"loss": ("loss_sum", "loss_sq"), "conf": ("conf_sum", "conf_sq")}
"""Each value's sum and sum of squares (``loss_mean``/``loss_m2`` and ``conf_mean``/``conf_m2``
are read from them)."""


class TrainingStats:
    """Running per-sample statistics of the training observations.

    ``loss_mean`` and ``conf_mean`` (the means), ``loss_m2`` and ``conf_m2`` (the sums of
    squared deviations from them) read as arrays too.

    Example:
        >>> stats = TrainingStats()
        >>> stats.update(Chunk(np.array([3, 1, 3]), np.array([1.0, 2.0, 3.0], np.float32),
        ...     np.full(3, np.nan, np.float32), np.full(3, np.nan), np.array([1, 1, 2]),
        ...     np.zeros(3, np.int32)))
        >>> stats.count[3], float(stats.loss_mean[3]), float(stats.loss_last[3])
        (np.int64(2), 2.0, 3.0)
    """

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {name: _empty(name, 0) for name in _STATS}
        self.last_step = 0
        self._last = np.empty(0, np.int64)  # scratch: each id's last position in a chunk

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        value, _, moment = name.rpartition("_")
        if arrays is not None and value in _MOMENTS and moment in ("mean", "m2"):
            total, squares = (arrays[n] for n in _MOMENTS[value])
            count = arrays["count"]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(count > 0, total / count, 0.0)
                return mean if moment == "mean" else np.maximum(squares - mean * total, 0.0)
        raise AttributeError(name)

    @property
    def size(self) -> int:
        """One past the largest index seen."""
        return int(self.arrays["count"].shape[0])

    def update(self, chunk: Chunk) -> None:
        """Fold one chunk of observations in (``NaN`` losses and negative ids are skipped).

        A sample seen several times in the chunk is folded once per observation, in order
        (see the module docstring).
        """
        ids, loss32 = chunk.ids, chunk.loss
        keep = ~np.isnan(loss32) & (ids >= 0)
        if not keep.any():
            return
        columns = [loss32, chunk.step, chunk.epoch, chunk.correct, chunk.label]
        if not keep.all():
            ids, columns = ids[keep], [column[keep] for column in columns]
        loss32, step, epoch, correct, labels = columns
        self._grow(int(ids.max()) + 1)
        a = self.arrays
        loss = loss32.astype(np.float64)
        # torch's exp (in place, in the array's memory): NumPy's is several times slower on
        # float64 on some CPUs (AVX2).
        conf = -loss
        torch.from_numpy(conf).exp_()
        np.add.at(a["count"], ids, 1)
        for name, value in (("loss", loss), ("conf", conf)):
            total, squares = _MOMENTS[name]
            np.add.at(a[total], ids, value)
            np.add.at(a[squares], ids, value * value)
        last = self._last_of(ids)
        latest = ids[last]
        a["loss_last"][latest] = loss32[last]
        a["step_last"][latest] = step[last]
        a["epoch_last"][latest] = epoch[last]
        known = _known(ids, correct)
        if known is not None:
            # Values of the array's own dtype: ufunc.at casting each one is ~40 times slower.
            np.add.at(a["correct_sum"], known[0], known[1].astype(np.float64))
            np.add.at(a["correct_count"], known[0], 1)
        labelled = _known(ids, labels)
        if labelled is not None:
            last = self._last_of(labelled[0])
            a["label"][labelled[0][last]] = labelled[1][last]
        self.last_step = max(self.last_step, int(step.max()))

    def _last_of(self, ids: np.ndarray) -> np.ndarray:
        """Which positions of ``ids`` hold each id's last occurrence (a mask)."""
        positions = np.arange(len(ids))
        scratch = self._last
        np.maximum.at(scratch, ids, positions)
        last = scratch[ids] == positions
        scratch[ids] = -1  # ready for the next chunk: only the touched entries
        return last

    def _grow(self, size: int) -> None:
        if size <= self.size:
            return
        capacity = max(size, int(self.size * 1.5))
        for name, old in self.arrays.items():
            grown = _empty(name, capacity)
            grown[: old.shape[0]] = old
            self.arrays[name] = grown
        self._last = np.full(capacity, -1, np.int64)

    def state_dict(self) -> dict[str, Any]:
        """The arrays as tensors (``torch.save(weights_only=True)``-safe)."""
        state: dict[str, Any] = {n: torch.from_numpy(v.copy()) for n, v in self.arrays.items()}
        state["last_step"] = self.last_step
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        state = _from_running_moments(state)
        for name in _STATS:
            if name in state:
                self.arrays[name] = np.asarray(state[name].numpy(), dtype=_DTYPES[name]).copy()
        self._last = np.full(self.size, -1, np.int64)
        self.last_step = int(state.get("last_step", 0))


def _from_running_moments(state: dict[str, Any]) -> dict[str, Any]:
    """A state saved with running means and squared deviations (``loss_mean``/``loss_m2``,
    ``conf_mean``/``conf_m2``: session files written before the store kept sums), as sums."""
    if "loss_sum" in state or "loss_mean" not in state:
        return state
    state = dict(state)
    count = state["count"].double()
    for value, (total, squares) in _MOMENTS.items():
        mean, m2 = state.pop(f"{value}_mean").double(), state.pop(f"{value}_m2").double()
        state[total] = mean * count
        state[squares] = m2 + mean * mean * count
    return state


def _empty(name: str, size: int) -> np.ndarray:
    fill = np.nan if name == "label" else 0
    return np.full(size, fill, dtype=_DTYPES[name])


def _known(ids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The ids and values where the values are known (not ``NaN``); ``None`` where none is.
    (Usually all or none are: then no mask is applied.)"""
    unknown = np.isnan(values)
    if not unknown.any():
        return ids, values
    if unknown.all():
        return None
    known = ~unknown
    return ids[known], values[known]


@dataclass
class ScanResult:
    """One full pass of the current model over a split; arrays are per sample, in id order.

    ``correct``, ``margin`` and ``label`` are ``NaN`` where unknown; ``embedding`` is
    ``[N, D]`` when an embedding hook was given or the model's outputs are small enough.
    """

    split: str
    step: int
    epoch: int
    ids: np.ndarray
    loss: np.ndarray
    correct: np.ndarray
    margin: np.ndarray
    label: np.ndarray
    embedding: np.ndarray | None = None
    duration: float = 0.0

    _ARRAYS = ("ids", "loss", "correct", "margin", "label", "embedding")

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"split": self.split, "step": self.step, "epoch": self.epoch}
        state["duration"] = self.duration
        for name in self._ARRAYS:
            value = getattr(self, name)
            state[name] = None if value is None else torch.from_numpy(np.ascontiguousarray(value))
        return state

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ScanResult:
        def array(name: str) -> Any:
            value = state.get(name)
            return None if value is None else value.numpy().copy()

        return cls(
            split=str(state["split"]),
            step=int(state["step"]),
            epoch=int(state["epoch"]),
            ids=array("ids"),
            loss=array("loss"),
            correct=array("correct"),
            margin=array("margin"),
            label=array("label"),
            embedding=array("embedding"),
            duration=float(state.get("duration", 0.0)),
        )


@dataclass
class SampleView:
    """Per-sample columns of one split from one source: what queries and exports read.

    ``variability`` is ``NaN`` for scans (one observation each); ``count`` is the number of
    observations behind each row.
    """

    split: str
    source: Source
    step: int
    ids: np.ndarray
    loss: np.ndarray
    confidence: np.ndarray
    variability: np.ndarray
    correct: np.ndarray
    margin: np.ndarray
    label: np.ndarray
    count: np.ndarray
    embedding: np.ndarray | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """The rows holding ``ids``, in the order of ``ids`` (ids not in the view are left out)."""
        order = np.argsort(self.ids, kind="stable")
        sorted_ids = self.ids[order]
        at = np.searchsorted(sorted_ids, ids).clip(0, max(len(sorted_ids) - 1, 0))
        found = (sorted_ids[at] == ids) if len(sorted_ids) else np.zeros(len(ids), dtype=bool)
        return order[at[found]]

    def take(self, rows: np.ndarray) -> SampleView:
        """The view restricted to ``rows`` (positions, in the given order)."""
        columns = {
            name: getattr(self, name)[rows]
            for name in ("ids", "loss", "confidence", "variability", "correct", "margin")
        }
        embedding = None if self.embedding is None else self.embedding[rows]
        return SampleView(
            self.split,
            self.source,
            self.step,
            label=self.label[rows],
            count=self.count[rows],
            embedding=embedding,
            **columns,
        )


class NoData(LookupError):
    """The split has no per-sample data yet (nothing trained on, or never scanned)."""


class SampleStore:
    """The run's per-sample data: training statistics and the latest scan of each split."""

    def __init__(self) -> None:
        self.training = TrainingStats()
        self.scans: dict[str, ScanResult] = {}
        self.unrecorded: str | None = None  # why training gives no per-sample values, if known

    def view(self, split: str, source: Source | None = None) -> SampleView:
        """The per-sample columns of ``split``.

        Args:
            split: ``"train"``, ``"val"`` or ``"test"``.
            source: ``"scan"`` (the latest scan), ``"training"`` (train only: the running
                statistics), or ``None``: the latest scan if there is one, else training.

        Raises:
            NoData: the chosen source has nothing for ``split``.
        """
        if source is None:
            source = "scan" if split in self.scans or split != "train" else "training"
        if source == "scan":
            scan = self.scans.get(split)
            if scan is None:
                raise NoData(
                    f"the {split} split was never scanned; scan it first: "
                    f"`onthefly scan --split {split}`"
                )
            return _scan_view(scan)
        if split != "train":
            raise NoData(f"training statistics exist for the train split only, not {split!r}")
        return _training_view(self.training, self.unrecorded)

    def state_dict(self) -> dict[str, Any]:
        return {
            "training": self.training.state_dict(),
            "scans": {split: scan.state_dict() for split, scan in self.scans.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.training.load_state_dict(state.get("training", {}))
        scans = state.get("scans", {})
        self.scans = {split: ScanResult.from_state(s) for split, s in scans.items()}


def _scan_view(scan: ScanResult) -> SampleView:
    n = len(scan.ids)
    return SampleView(
        split=scan.split,
        source="scan",
        step=scan.step,
        ids=scan.ids,
        loss=scan.loss.astype(np.float64),
        confidence=np.exp(-scan.loss.astype(np.float64)),
        variability=np.full(n, np.nan),
        correct=scan.correct.astype(np.float64),
        margin=scan.margin.astype(np.float64),
        label=scan.label,
        count=np.ones(n, dtype=np.int64),
        embedding=scan.embedding,
    )


def _training_view(stats: TrainingStats, unrecorded: str | None) -> SampleView:
    seen = np.flatnonzero(stats.count > 0)
    if len(seen) == 0:
        raise NoData(unrecorded or "no training sample was recorded yet; train a few steps first")
    count = stats.count[seen]
    confidence = stats.conf_sum[seen] / count
    spread = np.maximum(stats.conf_sq[seen] / count - confidence * confidence, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        correct = stats.correct_sum[seen] / stats.correct_count[seen]
    return SampleView(
        split="train",
        source="training",
        step=stats.last_step,
        ids=seen,
        loss=stats.loss_last[seen].astype(np.float64),
        confidence=confidence,
        variability=np.sqrt(spread),
        correct=correct,
        margin=np.full(len(seen), np.nan),
        label=stats.label[seen],
        count=count,
    )
