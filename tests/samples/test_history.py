"""The full history is written as complete Parquet parts, readable at any flush."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from onthefly.samples.buffer import Chunk
from onthefly.samples.history import HistoryWriter


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
