"""The full per-sample training history, as Parquet files in the run's temporary folder.

Every observation (step, epoch, index, loss, correct) is kept, in part files of complete
Parquet (``part-00000.parquet``, …) so that the folder is readable — and copyable by a
session export — at any flush. A daemon thread does the encoding and writing, a few calls
per part of 2^18 rows, most of their time in Arrow without the GIL. The training thread keeps
the chunks of a part until it is full and only then hands them over: a thread woken for
every chunk would take the GIL from it each time. Read it back with
``pyarrow.parquet.read_table(folder)``.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from onthefly.samples.buffer import Chunk

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


class HistoryWriter:
    """Writes chunks to ``folder`` as Parquet parts of about ``rows_per_part`` rows.

    Args:
        folder: where the part files go (created if missing).
        rows_per_part: rows gathered before a part is written (a flush writes what it has).

    Example:
        >>> writer = HistoryWriter(tmp_path / "history")  # doctest: +SKIP
        >>> writer.add(chunk); writer.flush()  # doctest: +SKIP
        >>> pq.read_table(tmp_path / "history").num_rows  # doctest: +SKIP
    """

    def __init__(self, folder: Path, rows_per_part: int = 1 << 18) -> None:
        self.folder = folder
        self._rows_per_part = rows_per_part
        self._part: list[Chunk] = []  # the part being gathered, on the caller's thread
        self._part_rows = 0
        # Parts to write; an Event: set it once what came before is written; None: stop.
        self._queue: queue.Queue[list[Chunk] | threading.Event | None] = queue.Queue()
        self._parts = 0
        self.rows_written = 0
        self._failed = False
        self._thread = threading.Thread(target=self._run, name="onthefly-history", daemon=True)
        self._thread.start()

    def add(self, chunk: Chunk) -> None:
        """Add one chunk (never blocks; a full part is handed to the writer's thread)."""
        self._part.append(chunk)
        self._part_rows += len(chunk)
        if self._part_rows >= self._rows_per_part:
            self._hand_over()

    def flush(self) -> None:
        """Write everything added so far as complete files, and wait until it is done."""
        self._hand_over()
        if self._thread.is_alive():
            written = threading.Event()
            self._queue.put(written)
            written.wait()

    def close(self) -> None:
        """Flush, then stop the writer thread."""
        self._hand_over()
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    def _hand_over(self) -> None:
        if self._part:
            self._queue.put(self._part)
            self._part, self._part_rows = [], 0

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, threading.Event):
                item.set()
            else:
                self._write(item)

    def _write(self, chunks: list[Chunk]) -> None:
        if not chunks or self._failed:
            return
        try:
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
