"""The full history is written as complete Parquet parts, readable at any flush."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from onthefly.samples.buffer import Chunk
from onthefly.samples.history import HAND_OVER_BYTES, HistoryWriter


def _chunk(step: int, n: int) -> Chunk:
    return Chunk(
        ids=np.arange(n, dtype=np.int64),
        loss=np.full(n, step, dtype=np.float32),
        correct=np.full(n, np.nan, dtype=np.float32),
        label=np.full(n, np.nan),
        step=np.full(n, step, dtype=np.int64),
        epoch=np.zeros(n, dtype=np.int32),
    )


def test_parts_hold_every_observation(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history", rows_per_part=100)
    try:
        for step in range(1, 6):
            writer.add(_chunk(step, 40))
        writer.flush()
        table = pq.read_table(tmp_path / "history")
        assert table.num_rows == 200
        assert sorted(set(table.column("step").to_pylist())) == [1, 2, 3, 4, 5]
        assert len(list((tmp_path / "history").glob("part-*.parquet"))) == 2  # 120 + 80 rows
    finally:
        writer.close()
    assert writer.rows_written == 200


class Shipped:
    """A shipment as the sample buffer makes one: read (``chunk()``) by whoever folds it."""

    def __init__(self, step: int, n: int, held_bytes: int = 0, fails: bool = False) -> None:
        self.step, self.n, self.held_bytes, self.fails = step, n, held_bytes, fails
        self.read_on: str | None = None

    def __len__(self) -> int:
        return self.n

    def chunk(self) -> Chunk:
        self.read_on = threading.current_thread().name
        if self.fails:
            raise RuntimeError("a bug in reading")
        return _chunk(self.step, self.n)


def test_shipments_are_read_on_the_writers_thread_and_a_failed_one_is_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folded: list[int] = []
    writer = HistoryWriter(tmp_path / "history", fold=lambda chunk: folded.append(len(chunk)))
    shipped = [Shipped(1, 30), Shipped(2, 20, fails=True), Shipped(3, 10)]
    try:
        for shipment in shipped:
            writer.add(shipment)
        assert all(s.read_on is None for s in shipped)  # kept until a hand-over
        writer.flush()
    finally:
        writer.close()
    assert {s.read_on for s in shipped} == {"onthefly-history"}
    assert folded == [40]
    assert sorted(set(pq.read_table(tmp_path / "history").column("step").to_pylist())) == [1, 3]
    assert "could not read shipped per-sample values" in caplog.text


def test_shipments_holding_many_tensor_bytes_are_handed_over_early(tmp_path: Path) -> None:
    writer = HistoryWriter(tmp_path / "history", fold=lambda chunk: None)
    small, large = Shipped(1, 8, held_bytes=1024), Shipped(2, 8, held_bytes=HAND_OVER_BYTES)
    try:
        writer.add(small)
        writer.add(large)  # the tensors it keeps alive go as soon as the writer can read them
        deadline = time.monotonic() + 10
        while large.read_on is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert small.read_on == large.read_on == "onthefly-history"
    finally:
        writer.close()
