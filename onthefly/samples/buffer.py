"""Per-batch sample values kept on their device and shipped to the host in batches.

Like the telemetry's step buffer (whose device-to-host copy it reuses): each training batch
only appends references (a few hundred nanoseconds); every ``every_steps`` batches (or
``every_s`` seconds) the batches' tensors are concatenated into one tensor per column and
copied once — on CUDA without blocking, into pinned memory, polled at later batches. The
host side receives :class:`Chunk` s in batch order.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from onthefly.callbacks._step_buffer import _copy_to_host, _Part
from onthefly.samples.attribution import Ids
from onthefly.samples.capture import SampleValues, host_values


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


@dataclass
class _Row:
    step: int
    epoch: int
    ids: Ids
    values: SampleValues


@dataclass
class _Transfer:
    rows: list[_Row]
    parts: dict[str, tuple[list[int], _Part]] = field(default_factory=dict)

    def ready(self) -> bool:
        return all(part.ready() for _, part in self.parts.values())

    def wait(self) -> None:
        for _, part in self.parts.values():
            part.wait()

    def chunk(self) -> Chunk:
        sizes = np.array([len(row.ids) for row in self.rows], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])

        def column(name: str, dtype: type, fill: float) -> np.ndarray:
            out: np.ndarray = np.full(int(starts[-1]), fill, dtype=dtype)
            if name in self.parts:
                rows, part = self.parts[name]
                host = part.host.numpy()
                offset = 0
                for index in rows:
                    size = int(sizes[index])
                    out[starts[index] : starts[index] + size] = host[offset : offset + size]
                    offset += size
            return out

        ids = column("ids", np.int64, -1)
        for index, row in enumerate(self.rows):
            if not isinstance(row.ids, torch.Tensor):
                ids[starts[index] : starts[index + 1]] = np.asarray(row.ids, dtype=np.int64)
        loss = column("loss", np.float32, np.nan)
        label = column("label", np.float64, np.nan)
        correct = column("correct", np.float32, np.nan)
        if "predicted" in self.parts:
            ignore = next((r.values.ignore for r in self.rows if r.values.ignore is not None), None)
            predicted = column("predicted", np.int64, -1)
            from_classes = host_values(loss, label, predicted, ignore)
            correct = np.where(np.isnan(correct), from_classes, correct)
        return Chunk(
            ids=ids,
            loss=loss,
            correct=correct,
            label=label,
            step=np.repeat(np.array([r.step for r in self.rows], dtype=np.int64), sizes),
            epoch=np.repeat(np.array([r.epoch for r in self.rows], dtype=np.int32), sizes),
        )


class SampleBuffer:
    """Collects per-batch sample values and hands them to ``sink`` as host :class:`Chunk` s.

    Args:
        sink: receives each chunk, in batch order.
        every_steps: start a copy after this many batches …
        every_s: … or once this many seconds passed since the last copy started.

    Example:
        >>> chunks = []
        >>> buffer = SampleBuffer(chunks.append, every_steps=1)
        >>> buffer.add(1, 0, [4, 2], SampleValues(torch.tensor([0.5, 0.25])))
        >>> chunks[0].ids.tolist(), chunks[0].loss.tolist()
        ([4, 2], [0.5, 0.25])
    """

    def __init__(
        self, sink: Callable[[Chunk], None], every_steps: int = 64, every_s: float = 0.5
    ) -> None:
        self._sink = sink
        self._every_steps = every_steps
        self._every_s = every_s
        self._rows: list[_Row] = []
        self._in_flight: deque[_Transfer] = deque()
        self._last_start = time.monotonic()

    def add(self, step: int, epoch: int, ids: Ids, values: SampleValues) -> None:
        """Record one batch; never waits for the device."""
        self._rows.append(_Row(step, epoch, ids, values))
        if len(self._rows) >= self._every_steps:
            self._start(time.monotonic())
        elif len(self._rows) % 8 == 0:  # the clock is read every few batches only
            now = time.monotonic()
            if now - self._last_start >= self._every_s:
                self._start(now)
        if self._in_flight:
            self._deliver(wait=False)

    def flush(self) -> None:
        """Ship everything recorded so far and wait for it (pause, epoch end, end of run)."""
        if self._rows:
            self._start(time.monotonic())
        self._deliver(wait=True)

    def _start(self, now: float) -> None:
        transfer = _Transfer(self._rows)
        self._rows = []
        self._last_start = now
        columns: dict[str, tuple[list[int], list[torch.Tensor]]] = {}
        for index, row in enumerate(transfer.rows):
            values = row.values
            for name, tensor in (
                ("loss", values.loss),
                ("correct", values.correct),
                ("label", values.label),
                ("predicted", values.predicted),
                ("ids", row.ids if isinstance(row.ids, torch.Tensor) else None),
            ):
                if tensor is not None:
                    rows, tensors = columns.setdefault(name, ([], []))
                    rows.append(index)
                    tensors.append(tensor.reshape(-1))
        for name, (rows, tensors) in columns.items():
            stacked = torch.cat(tensors)
            transfer.parts[name] = (rows, _copy_to_host(stacked.device, [], stacked))
        self._in_flight.append(transfer)

    def _deliver(self, wait: bool) -> None:
        while self._in_flight:
            head = self._in_flight[0]
            if wait:
                head.wait()
            elif not head.ready():
                return
            self._in_flight.popleft()
            self._sink(head.chunk())
