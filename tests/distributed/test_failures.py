"""A rank that dies or hangs ends the others with a clear error within the timeout."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.distributed.ranks import launched

TIMEOUT_S = 3


@pytest.mark.parametrize(
    ("paused", "sig"),
    [(False, signal.SIGKILL), (True, signal.SIGSTOP)],
    ids=["killed-while-training", "hung-while-paused"],
)
def test_a_lost_rank_ends_rank_0_with_a_clear_error(
    paused: bool, sig: int, onthefly_home: Path, tmp_path: Path
) -> None:
    args = ["--out", str(tmp_path), "--step-sleep", "0.03"]
    env = {"ONTHEFLY_DIST_TIMEOUT": str(TIMEOUT_S)}
    with launched("tests.distributed.run_native", args, onthefly_home, tmp_path, env=env) as ranks:
        client = LiveClient(wait_for_session(onthefly_home))
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
        if paused:
            assert client.call("pause")["type"] == "reply"
        lost = time.monotonic()
        ranks.kill(1, sig)
        code = ranks.processes[0].wait(timeout=60)
        took = time.monotonic() - lost
        err = ranks.err(0)
        finished = client.wait_event(lambda e: e.get("state") == "finished")
        client.close()
    assert code != 0
    assert took < TIMEOUT_S + 15, took  # the timeout, plus start-up of the error path
    assert "onthefly.errors.DistributedError: rank 0: the " in err, err
    assert "Another rank has probably died or hung" in err
    assert finished["reason"] == "stopped by DistributedError"
    assert session_files(onthefly_home) == []
