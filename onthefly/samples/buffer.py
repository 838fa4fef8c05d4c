"""Per-batch sample values kept on their device and shipped to the host in batches.

Like the telemetry's step buffer (both ship through :class:`onthefly.transfers.Batches`):
each training batch only appends references (a few hundred nanoseconds); every
``every_steps`` batches (or ``every_s`` seconds) the batches' tensors are concatenated into
one tensor per column and copied once — on CUDA without blocking, into pinned memory,
polled at later batches. The host side receives the shipments in batch order; each becomes
a :class:`Chunk` when asked (:meth:`Shipment.chunk`). Tensors that are on the CPU already
need no copy: what a chunk needs waits until the chunk is asked for, once per shipment,
but for the concatenation of the usual batches' kept scores and labels, done when the
shipment starts so that it keeps no per-batch object (see :class:`_Transfer`).
Losses a batch left to the copy (:attr:`SampleValues.unreduced`) are evaluated with the
columns: one loss call for the copy's batches.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, Protocol

import numpy as np
import torch

from onthefly.samples.attribution import Ids
from onthefly.samples.capture import SampleValues, host_hits
from onthefly.samples.loss_spec import LossCall
from onthefly.transfers import Batches, HostCopy, copy_to_host

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Chunk:
    """Sample values of consecutive training batches, on the host (one entry per sample).

    ``correct`` and ``label`` are ``NaN`` where unknown.
    """

    ids: np.ndarray
    loss: np.ndarray
    correct: np.ndarray
    label: np.ndarray
    step: np.ndarray
    epoch: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def held_bytes(self) -> int:
        """Nothing: a chunk holds no tensor (see :attr:`Shipment.held_bytes`)."""
        return 0

    def chunk(self) -> Chunk:
        """Itself (a chunk is a :class:`Shipment` already on the host)."""
        return self


class Shipment(Protocol):
    """Sample values on their way to the host: a :class:`Chunk` once asked for.

    Its length is its number of samples.
    """

    def __len__(self) -> int: ...

    @property
    def held_bytes(self) -> int:
        """Bytes of the batches' tensors it keeps alive until it is read (the scores kept
        for the losses left to it, the values still on their device)."""
        ...

    def chunk(self) -> Chunk:
        """The values on the host (may do the work left for the reader: call it once, on
        any thread)."""
        ...


def read(shipments: Sequence[Shipment]) -> Chunk | None:
    """The shipments' values on the host as one chunk, in order; ``None`` where none could be
    read. Consecutive shipments of alike batches waiting on the host are read as one (one
    loss call, one conversion of each column for all of them, instead of one each and a
    concatenation of the results). A shipment, or such a run of them, whose reading failed
    is skipped (logged): a bug there must cost neither the run nor the other shipments."""
    chunks = []
    for run in _alike_runs(shipments):
        try:
            chunks.append((_Transfer.together(run) if len(run) > 1 else run[0]).chunk())
        except Exception:
            log.exception("OnTheFly could not read shipped per-sample values; they are skipped")
    return joined(chunks) if chunks else None


def joined(chunks: Sequence[Chunk]) -> Chunk:
    """One chunk holding ``chunks``' rows, in order."""
    if len(chunks) == 1:
        return chunks[0]
    return Chunk(*(np.concatenate([getattr(c, f.name) for c in chunks]) for f in fields(Chunk)))


_Row = tuple[int, int, Ids, SampleValues]
"""One training batch as recorded: step, epoch, sample ids, values (a plain tuple: cheap)."""

# The device columns: name, host dtype, the value of a sample whose batch lacks the column.
_COLUMNS = (
    ("loss", np.float32, np.nan),
    ("correct", np.float32, np.nan),
    ("label", np.float64, np.nan),
    ("hit", np.int8, -1),  # 1: the label has the highest score, 0: it has not, -1: unknown
)


@dataclass
class _Transfer:
    """The batches of one copy: their steps, epochs and ids, and their values as one tensor
    per column, copied to the host once — or, on the host already, what gives the columns
    (``left``: made in :meth:`chunk`, on the reader's thread).

    It keeps no per-batch object that it does not need: a shipment waits for hundreds of
    steps before its history hand-over, and every object alive that long is one more that the
    garbage collector walks at each of its passes over the young objects (and per-batch
    tensors are small blocks left between the step's own allocations)."""

    steps: tuple[int, ...]
    epochs: tuple[int, ...]
    ids: tuple[Ids, ...]
    sizes: np.ndarray
    ignore: int | None  # a sample whose label equals it has no valid target
    parts: dict[str, HostCopy] = field(default_factory=dict)
    left: _Deferred | list[_Row] | None = None

    def __len__(self) -> int:
        return int(self.sizes.sum())

    @property
    def held_bytes(self) -> int:
        left = self.left
        if isinstance(left, _Deferred):
            return left.scores.nbytes
        # A few reads per batch, once per shipment.
        return sum(
            (v.predicted.nbytes if v.predicted is not None else 0)
            + (v.loss.nbytes if v.loss is not None else 0)
            for _, _, _, v in left or ()
        )

    def joins(self, first: _Transfer) -> bool:
        """Whether this transfer's batches read with ``first``'s as one: both wait on the
        host with alike batches' scores and labels for the same loss call."""
        mine, theirs = self.left, first.left
        return (
            isinstance(mine, _Deferred)
            and isinstance(theirs, _Deferred)
            and mine.joins(theirs)
            and self.ignore == first.ignore
        )

    @classmethod
    def together(cls, run: Sequence[_Transfer]) -> _Transfer:
        """One transfer of ``run``'s batches, in order (each :meth:`joins` the first)."""
        return cls(
            tuple(itertools.chain.from_iterable(t.steps for t in run)),
            tuple(itertools.chain.from_iterable(t.epochs for t in run)),
            tuple(itertools.chain.from_iterable(t.ids for t in run)),
            np.concatenate([t.sizes for t in run]),
            run[0].ignore,
            # All of them _Deferred (joins()); the filter says so to the type checker.
            left=_Deferred.joined([t.left for t in run if isinstance(t.left, _Deferred)]),
        )

    def ready(self) -> bool:
        return all(part.ready() for part in self.parts.values())

    def wait(self) -> None:
        for part in self.parts.values():
            part.wait()

    def chunk(self) -> Chunk:
        left, self.left = self.left, None
        if left is not None:
            columns = (
                left.columns() if isinstance(left, _Deferred) else _batch_columns(left, self.sizes)
            )
            self.parts = _copies(columns, self.ids)
        total = int(self.sizes.sum())
        host = {
            name: _host(self.parts.get(name), dtype, fill, total) for name, dtype, fill in _COLUMNS
        }
        loss, correct, label = host["loss"], host["correct"], host["label"]
        if "hit" in self.parts:
            from_hits = host_hits(loss, label, host["hit"], self.ignore)
            correct = np.where(np.isnan(correct), from_hits, correct)
        return Chunk(
            ids=self._ids(),
            loss=loss,
            correct=correct,
            label=label,
            step=np.repeat(np.array(self.steps, dtype=np.int64), self.sizes),
            epoch=np.repeat(np.array(self.epochs, dtype=np.int32), self.sizes),
        )

    def _ids(self) -> np.ndarray:
        if "ids" not in self.parts:  # index lists from the sampler (or counter ranges)
            flat = itertools.chain.from_iterable(self.ids)
            return np.fromiter(flat, np.int64, int(self.sizes.sum()))
        # Some batches carried their ids as tensors (copied with the values), others not.
        from_device = self.parts["ids"].host.numpy()
        out = []
        offset = 0
        for ids in self.ids:
            if isinstance(ids, torch.Tensor):
                out.append(from_device[offset : offset + len(ids)])
                offset += len(ids)
            else:
                out.append(np.asarray(ids, dtype=np.int64))
        return np.concatenate(out).astype(np.int64, copy=False)


def _alike_runs(shipments: Sequence[Shipment]) -> list[list[Any]]:
    """``shipments`` in order, in runs that read as one (:meth:`_Transfer.joins`); any other
    shipment is a run of its own."""
    runs: list[list[Any]] = []
    for shipment in shipments:
        first = runs[-1][0] if runs else None
        if (
            isinstance(shipment, _Transfer)
            and isinstance(first, _Transfer)
            and shipment.joins(first)
        ):
            runs[-1].append(shipment)
        else:
            runs.append([shipment])
    return runs


def _host(part: HostCopy | None, dtype: type, fill: float, total: int) -> np.ndarray:
    if part is None:
        return np.full(total, fill, dtype=dtype)
    return part.host.numpy().astype(dtype)


def hits(scores: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Whether each row's label has the row's highest score (a tie counts): the correctness
    of one-target predictions, in two reductions (an ``argmax`` over a few classes costs
    several times as much per row). Labels out of range (an ``ignore_index``) are looked up
    anywhere: the host masks them."""
    safe = labels.clamp(0, scores.shape[1] - 1).unsqueeze(1)
    return scores.gather(1, safe).squeeze(1) >= scores.amax(1)


def _row_hits(values: SampleValues) -> torch.Tensor | None:
    """One batch's :func:`hits`, from its kept scores or predicted classes."""
    predicted, label = values.predicted, values.label
    if predicted is None or label is None:
        return None
    return hits(predicted, label) if predicted.ndim == 2 else predicted == label


def _losses(rows: list[_Row]) -> list[torch.Tensor | None]:
    """Each batch's losses; those left to the copy are evaluated here: one call for each run
    of consecutive batches with the same loss call and scores alike (usually all of them)."""
    losses: list[torch.Tensor | None] = []
    group: list[_Deferred] = []
    for row in rows:
        values = row[3]
        deferred = _left_to_copy(values)
        if group and (deferred is None or not deferred.joins(group[0])):
            losses.extend(_evaluate(group))
            group = []
        if deferred is None:
            losses.append(values.loss)
        else:
            group.append(deferred)
    return losses + _evaluate(group)


class _Deferred(NamedTuple):
    """A loss call left to the copy and what it is evaluated from: one batch's kept scores
    and labels, or those of alike batches concatenated (:func:`_kept_alike`)."""

    call: LossCall
    scores: torch.Tensor
    label: torch.Tensor

    def columns(self) -> dict[str, torch.Tensor | None]:
        """The batches' columns: losses from one loss call, classes from one :func:`hits`."""
        scores, label = self.scores, self.label
        return {
            "loss": self.call(scores, label),
            "correct": None,
            "label": label,
            "hit": hits(scores, label),
        }

    @classmethod
    def joined(cls, group: Sequence[_Deferred]) -> _Deferred:
        """One call for ``group``'s scores and labels, concatenated in order (each
        :meth:`joins` the first)."""
        if len(group) == 1:
            return group[0]
        scores = torch.cat([d.scores for d in group])
        return cls(group[0].call, scores, torch.cat([d.label for d in group]))

    def joins(self, first: _Deferred) -> bool:
        # Scores of another dtype would be promoted by the concatenation: other bits.
        scores, like = self.scores, first.scores
        return (
            self.call == first.call
            and scores.dtype == like.dtype
            and scores.device == like.device
            and scores.shape[1:] == like.shape[1:]
        )


def _left_to_copy(values: SampleValues) -> _Deferred | None:
    if values.loss is not None or values.unreduced is None:
        return None
    if values.predicted is None or values.label is None:
        return None
    return _Deferred(values.unreduced, values.predicted, values.label)


def _kept_alike(batches: Sequence[SampleValues]) -> _Deferred | None:
    """The usual copy's scores and labels at once: when every batch left its loss to the copy
    with the same loss call and kept scores of one dtype (a concatenation of others would
    promote them: other bits), the scores and labels are concatenated once each (which also
    checks their devices and classes). ``None`` for any other mix of batches. A few reads
    per batch: this runs on the training thread."""
    first = batches[0]
    call, like = first.unreduced, first.predicted
    if call is None or like is None:
        return None
    scores_of, labels_of = [], []
    for values in batches:  # one plain loop: a generator's resumption per batch costs more
        scores, label = values.predicted, values.label
        if values.unreduced != call or values.loss is not None or label is None:
            return None
        if scores is None or scores.ndim != 2 or scores.dtype != like.dtype:
            return None
        scores_of.append(scores)
        labels_of.append(label)
    try:
        scores = torch.cat(scores_of)
        labels = torch.cat(labels_of)
    except RuntimeError:  # several devices or numbers of classes
        return None
    return _Deferred(call, scores, labels)


def _evaluate(group: list[_Deferred]) -> list[torch.Tensor | None]:
    if not group:
        return []
    call = _Deferred.joined(group)
    losses = call.call(call.scores, call.label)
    return list(losses.split([d.label.shape[0] for d in group])) if len(group) > 1 else [losses]


def _column(
    name: str, sizes: np.ndarray, tensors: list[torch.Tensor | None]
) -> torch.Tensor | None:
    """One column of every batch as one tensor; batches without it get ``NaN``/``-1``."""
    present = [t for t in tensors if t is not None]
    if not present:
        return None
    if len(present) < len(tensors):  # rare: the batches differ in what they report
        like = present[0]
        flags = name == "hit"
        fill = -1 if flags else float("nan")
        dtype = torch.int8 if flags else torch.float64
        tensors = [
            torch.full((int(size),), fill, dtype=dtype, device=like.device)
            if t is None
            else t.to(dtype)
            for t, size in zip(tensors, sizes, strict=True)
        ]
    return torch.cat(tensors)  # type: ignore[arg-type]  # every column of SampleValues is one-dimensional


class SampleBuffer:
    """Collects per-batch sample values and hands them to ``sink`` in batches.

    Args:
        sink: receives each :class:`Shipment`, in batch order (its ``chunk()`` gives the
            values on the host).
        every_steps: start a copy after this many batches …
        every_s: … or once this many seconds passed since the last copy started.

    Example:
        >>> chunks = []
        >>> buffer = SampleBuffer(lambda shipment: chunks.append(shipment.chunk()), every_steps=1)
        >>> buffer.add(1, 0, [4, 2], SampleValues(torch.tensor([0.5, 0.25])))
        >>> chunks[0].ids.tolist(), chunks[0].loss.tolist()
        ([4, 2], [0.5, 0.25])
    """

    def __init__(
        self, sink: Callable[[Shipment], None], every_steps: int = 64, every_s: float = 0.5
    ) -> None:
        # The clock is read every few batches only.
        self._batches = Batches(_start, sink, every_steps, every_s, clock_every=8)

    def add(self, step: int, epoch: int, ids: Ids, values: SampleValues) -> None:
        """Record one batch; never waits for the device."""
        self._batches.add((step, epoch, ids, values))

    def add_all(self, batches: list[tuple[int, int, Ids, SampleValues]]) -> None:
        """Record several batches at once, in order (as :meth:`add` would one by one)."""
        self._batches.add_all(batches)

    def flush(self) -> None:
        """Ship everything recorded so far and wait for it (pause, epoch end, end of run)."""
        self._batches.flush()


def _start(rows: list[_Row]) -> _Transfer:
    """Concatenate each column of the rows into one tensor and start copying it to the host.
    Rows already on the host leave their columns to the reader (see the module docstring):
    alike batches' scores and labels are concatenated now, so that the rows go now."""
    steps, epochs, ids, values = zip(*rows, strict=True)  # rows of four
    transfer = _Transfer(
        steps,
        epochs,
        ids,
        np.array([len(batch) for batch in ids], dtype=np.int64),
        next((v.ignore for v in values if v.ignore is not None), None),
    )
    kept = _kept_alike(values)
    if _on_host(rows):
        transfer.left = kept or rows
    else:
        columns = kept.columns() if kept is not None else _batch_columns(rows, transfer.sizes)
        transfer.parts = _copies(columns, ids)
    return transfer


def _on_host(rows: list[_Row]) -> bool:
    """Whether the rows' tensors are on the CPU: those of the first and the last batch (a
    run's batches do not change devices; columns of mixed devices would fail to concatenate
    either way). A few reads: this runs on the training thread."""
    for _, _, ids, values in (rows[0], rows[-1]):
        computed = values.loss if values.loss is not None else values.predicted
        if computed is None or computed.device.type != "cpu":
            return False
        if isinstance(ids, torch.Tensor) and ids.device.type != "cpu":
            return False
    return True


def _batch_columns(rows: list[_Row], sizes: np.ndarray) -> dict[str, torch.Tensor | None]:
    """Each column of the rows (of ``sizes`` samples) as one tensor (``None``: no batch has
    it), batch by batch: for batches that are not alike (:func:`_kept_alike`)."""
    by_name: dict[str, list[torch.Tensor | None]] = {
        "loss": _losses(rows),
        "correct": [row[3].correct for row in rows],
        "label": [row[3].label for row in rows],
        "hit": [_row_hits(row[3]) for row in rows],
    }
    return {name: _column(name, sizes, by_name[name]) for name, _, _ in _COLUMNS}


def _copies(columns: dict[str, torch.Tensor | None], ids: tuple[Ids, ...]) -> dict[str, HostCopy]:
    """The columns' copies to the host, started; ids that batches carried as tensors are one
    more column."""
    tensor_ids = [batch for batch in ids if isinstance(batch, torch.Tensor)]
    if tensor_ids:
        columns["ids"] = torch.cat(tensor_ids)
    return {name: copy_to_host(stacked) for name, stacked in columns.items() if stacked is not None}
