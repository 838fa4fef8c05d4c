"""A session file of a distributed run: every rank finds its own data position and RNG."""

from __future__ import annotations

from pathlib import Path

import pytest

from onthefly.sessions.data_position import DataPosition
from onthefly.sessions.manifest import Manifest
from onthefly.sessions.resume import SavedState


def _saved(world_size: int, per_rank: int) -> SavedState:
    manifest = Manifest(
        project="p", run="r", run_name="r", driver="native", step=5, epoch=0, world_size=world_size
    )
    positions = [[DataPosition(None, consumed=10 + rank)] for rank in range(per_rank)]
    rngs = [{"rank": rank} for rank in range(max(per_rank, 1))]
    return SavedState(Path("run.otf"), manifest, {}, {}, rngs, [DataPosition(None, 10)], positions)


def test_each_rank_gets_its_own_position_and_rng() -> None:
    saved = _saved(world_size=2, per_rank=2)
    assert [saved.positions_for(rank)[0].consumed for rank in (0, 1)] == [10, 11]
    assert [saved.rng_for(rank) for rank in (0, 1)] == [{"rank": 0}, {"rank": 1}]


def test_a_single_process_file_gives_every_rank_rank_0s_state_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    saved = _saved(world_size=1, per_rank=0)
    assert saved.positions_for(1)[0].consumed == 10 and saved.rng_for(1) == {"rank": 0}
    saved.check_world(1)
    assert caplog.text == ""
    saved.check_world(2)
    assert "run.otf was exported by 1 rank(s) and resumes on 2" in caplog.text
