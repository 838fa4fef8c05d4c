"""The checkpoint ring keeps the last N snapshots within a byte bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from onthefly.errors import ConfigurationError
from onthefly.sessions.ring import CheckpointRing


def writer(size: int):
    def write(path: Path) -> int:
        path.write_bytes(b"x" * size)
        return size

    return write


def test_the_oldest_snapshots_go_first(tmp_path: Path) -> None:
    ring = CheckpointRing(tmp_path, capacity=2, max_bytes=1000)
    for step in (1, 2, 3):
        ring.add(step, 0, "pause", writer(10))
    assert [(e.id, e.step) for e in ring.entries()] == [("c2", 2), ("c3", 3)]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c2.otf", "c3.otf"]
    assert ring.path("c1") is None and ring.path("c3") == tmp_path / "c3.otf"


def test_the_byte_bound_holds(tmp_path: Path) -> None:
    ring = CheckpointRing(tmp_path, capacity=10, max_bytes=25)
    for step in (1, 2, 3):
        ring.add(step, 0, "request", writer(10))
    assert [e.id for e in ring.entries()] == ["c2", "c3"]
    assert ring.add(4, 0, "request", writer(30)) is None  # alone over the bound: not kept
    assert ring.entries() == [] and list(tmp_path.iterdir()) == []


def test_a_ring_of_zero_keeps_nothing(tmp_path: Path) -> None:
    ring = CheckpointRing(tmp_path / "ring", capacity=0)
    assert ring.add(1, 0, "pause", writer(10)) is None
    assert not (tmp_path / "ring").exists()
    with pytest.raises(ConfigurationError, match="checkpoints=-1"):
        CheckpointRing(tmp_path, capacity=-1)
