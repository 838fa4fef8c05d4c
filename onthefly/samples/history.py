"""The full per-sample training history, as Parquet files in the run's temporary folder;
and the thread that folds the observations into the run's per-sample statistics.

Every observation (step, epoch, index, loss, correct) is kept, in part files of complete
Parquet (``part-00000.parquet``, …) so that the folder is readable — and copyable by a
session export — at any flush. A daemon thread does the folding, encoding and writing, a
few calls per hand-over of 2^16 rows (about a thousand batches of 64), most of their time in
NumPy and Arrow without the GIL. The training thread keeps the shipments until a hand-over
is full and only then gives them away: a thread woken for every shipment would take the GIL
from it each time, and a fold of many small chunks would hand the GIL back and forth a
hundred times where a fold of one large chunk does a dozen times. The shipments are read
there too (:meth:`~onthefly.samples.buffer.Shipment.chunk`: the losses evaluated from the
kept log-probabilities, the columns made), so the training thread only appends references;
a hand-over comes sooner when the shipments keep more than ``HAND_OVER_BYTES`` of tensors
alive. Read it back with ``pyarrow.parquet.read_table(folder)``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from onthefly.samples.buffer import Chunk, Shipment, joined, read

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

HAND_OVER_ROWS = 1 << 16
"""Rows gathered on the training thread before the history thread folds and keeps them."""

HAND_OVER_BYTES = 1 << 24
"""Bytes of tensors the gathered shipments may keep alive before they are handed over
(scores kept for their losses: at most 2^16 elements per batch)."""


class HistoryWriter:
    """Reads shipments, folds them into ``fold`` and writes them to ``folder`` as Parquet
    parts of about ``rows_per_part`` rows, on a thread of its own.

    Args:
        folder: where the part files go (created if missing).
        rows_per_part: rows written together as one part (a flush writes what it has).
        fold: receives each chunk (a few concatenated) before it is written, on the
            writer's thread: the run's :class:`~onthefly.samples.store.TrainingStats`.
        hand_over_rows: rows gathered before the writer's thread takes them (or sooner:
            ``HAND_OVER_BYTES``).

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
        hand_over_rows: int = HAND_OVER_ROWS,
    ) -> None:
        self.folder = folder
        self._rows_per_part = rows_per_part
        self._fold = fold
        self._hand_over_rows = min(hand_over_rows, rows_per_part)
        self._gathered: list[Shipment] = []  # on the caller's thread, until handed over
        self._gathered_rows = 0
        self._gathered_bytes = 0
        self._part: list[Chunk] = []  # folded, not written yet (the writer's thread)
        self._part_rows = 0
        # Chunks to fold and keep; (write, Event): write what is kept if asked, then set the
        # event (everything before it is done); None: stop.
        self._queue: queue.Queue[list[Shipment] | tuple[bool, threading.Event] | None] = (
            queue.Queue()
        )
        self._parts = 0
        self.rows_written = 0
        self._failed = False
        self._fold_failed = False
        self._thread = threading.Thread(target=self._run, name="onthefly-history", daemon=True)
        self._thread.start()

    def add(self, shipment: Shipment) -> None:
        """Add one shipment or chunk (never blocks; a full hand-over goes to the writer's
        thread, which reads it)."""
        self._gathered.append(shipment)
        self._gathered_rows += len(shipment)
        self._gathered_bytes += shipment.held_bytes
        if self._gathered_rows >= self._hand_over_rows or self._gathered_bytes >= HAND_OVER_BYTES:
            self._hand_over()

    def sync(self) -> None:
        """Fold everything added so far, and wait until it is done (queries read it then)."""
        self._wait(write=False)

    def flush(self) -> None:
        """Fold and write everything added so far as complete files, and wait until done."""
        self._wait(write=True)

    def close(self) -> None:
        """Flush, then stop the writer thread."""
        self.flush()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _wait(self, write: bool) -> None:
        self._hand_over()
        if self._thread.is_alive():
            done = threading.Event()
            self._queue.put((write, done))
            done.wait()

    def _hand_over(self) -> None:
        if self._gathered:
            self._queue.put(self._gathered)
            self._gathered, self._gathered_rows, self._gathered_bytes = [], 0, 0

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, tuple):
                write, done = item
                if write:
                    self._write()
                done.set()
                continue
            chunk = read(item)
            if chunk is None:
                continue
            self._fold_in(chunk)
            self._part.append(chunk)
            self._part_rows += len(chunk)
            if self._part_rows >= self._rows_per_part:
                self._write()

    def _fold_in(self, chunk: Chunk) -> None:
        if self._fold is None or self._fold_failed:
            return
        try:
            self._fold(chunk)
        except Exception:  # a bug here must not end the thread (sync and flush wait for it)
            self._fold_failed = True
            log.exception("OnTheFly stops updating the per-sample statistics")

    def _write(self) -> None:
        chunks, self._part, self._part_rows = self._part, [], 0
        if not chunks or self._failed:
            return
        try:
            chunk = joined(chunks)
            table = pa.table(
                [
                    pa.array(chunk.step),
                    pa.array(chunk.epoch),
                    pa.array(chunk.ids),
                    pa.array(chunk.loss),
                    pa.array(chunk.correct),
                ],
                schema=SCHEMA,
            )
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
        except Exception:  # nor a bug here (the thread must live on: flush() waits for it)
            self._failed = True
            log.exception("OnTheFly stops writing the per-sample history")
            return
        self._parts += 1
        self.rows_written += table.num_rows
