"""The full per-sample training history, as Parquet files in the run's temporary folder.

Every observation (step, epoch, index, loss, correct) is kept, in part files of complete
Parquet (``part-00000.parquet``, …) so that the folder is readable — and copyable by a
session export — at any flush. A daemon thread does the encoding and writing (and, given
``fold``, the folding of each chunk into the running statistics, and whatever a shipment
left for its reader, see :class:`~onthefly.samples.buffer.Shipment`); the training thread
only queues what it shipped. Read it back with ``pyarrow.parquet.read_table(folder)``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from onthefly.samples.buffer import Chunk, Shipment

log = logging.getLogger(__name__)

SCHEMA = pa.schema(
    [
        ("step", pa.int64()),
        ("epoch", pa.int32()),
        ("index", pa.int64()),
        ("loss", pa.float32()),
        ("correct", pa.float32()),
    ]
)


class _Barrier:
    """Queued behind the chunks: set once they are folded (and written, with ``write``)."""

    def __init__(self, write: bool) -> None:
        self.write = write
        self.done = threading.Event()


class HistoryWriter:
    """Writes chunks to ``folder`` as Parquet parts of about ``rows_per_part`` rows.

    Args:
        folder: where the part files go (created if missing).
        rows_per_part: rows gathered before a part is written (a flush writes what it has).
        fold: called with each chunk on the writer's thread, in order (e.g. a store update);
            after :meth:`sync` or :meth:`flush` returns, every chunk queued before was folded.

    Example:
        >>> writer = HistoryWriter(tmp_path / "history")  # doctest: +SKIP
        >>> writer.add(chunk); writer.flush()  # doctest: +SKIP
        >>> pq.read_table(tmp_path / "history").num_rows  # doctest: +SKIP
    """

    def __init__(
        self,
        folder: Path,
        rows_per_part: int = 1 << 18,
        fold: Callable[[Chunk], None] | None = None,
    ) -> None:
        self.folder = folder
        self._fold = fold
        self._rows_per_part = rows_per_part
        self._queue: queue.Queue[Shipment | _Barrier | None] = queue.Queue()
        self._parts = 0
        self.rows_written = 0
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="onthefly-history", daemon=True)
        self._thread.start()

    def add(self, shipment: Shipment) -> None:
        """Queue one chunk, or a shipment that becomes one on the writer's thread (never
        blocks)."""
        self._queue.put(shipment)

    def sync(self) -> None:
        """Wait until every chunk queued so far was folded (no file is forced out)."""
        self._barrier(write=False)

    def flush(self) -> None:
        """Write everything queued so far as complete files, and wait until it is done."""
        self._barrier(write=True)

    def _barrier(self, write: bool) -> None:
        if self._thread.is_alive():
            barrier = _Barrier(write)
            self._queue.put(barrier)
            barrier.done.wait()

    def close(self) -> None:
        """Flush, then stop the writer thread."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _run(self) -> None:
        pending: list[Chunk] = []
        rows = 0
        while True:
            item = self._queue.get()
            if item is not None and not isinstance(item, _Barrier):
                chunk = self._received(item)
                if chunk is None:
                    continue
                self._fold_one(chunk)
                pending.append(chunk)
                rows += len(chunk)
                if rows < self._rows_per_part:
                    continue
            if isinstance(item, _Barrier) and not item.write:
                item.done.set()
                continue
            self._write(pending)
            pending, rows = [], 0
            if item is None:
                return
            if isinstance(item, _Barrier):
                item.done.set()

    def _received(self, shipment: Shipment) -> Chunk | None:
        try:
            return shipment.chunk()
        except Exception:  # a bug here must not stop the history, nor the run
            log.exception("OnTheFly could not read shipped per-sample values; they are skipped")
            return None

    def _fold_one(self, chunk: Chunk) -> None:
        if self._fold is None:
            return
        try:
            self._fold(chunk)
        except Exception:  # a bug here must not stop the history, nor the run
            log.exception("OnTheFly could not fold per-sample values in; they are skipped")

    def _write(self, chunks: list[Chunk]) -> None:
        if not chunks or self._failed:
            return
        table = pa.table(
            [
                pa.array(np.concatenate([c.step for c in chunks])),
                pa.array(np.concatenate([c.epoch for c in chunks])),
                pa.array(np.concatenate([c.ids for c in chunks])),
                pa.array(np.concatenate([c.loss for c in chunks])),
                pa.array(np.concatenate([c.correct for c in chunks])),
            ],
            schema=SCHEMA,
        )
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self.folder / f"part-{self._parts:05d}.parquet"
            # Dictionary encoding pays off for repeated values; steps, ids and losses rarely
            # repeat within a part, and trying it costs 5x the CPU of the plain encoding
            # (and files as large) on this thread, beside training.
            pq.write_table(table, path, use_dictionary=False)
        except OSError as exc:  # a full disk must not cost the training run
            self._failed = True
            log.warning("OnTheFly stops writing the per-sample history: %s", exc)
            return
        self._parts += 1
        self.rows_written += table.num_rows
