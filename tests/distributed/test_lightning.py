"""Lightning ``strategy="ddp"`` and ``"ddp_spawn"`` on two CPU ranks, steered by one client."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from onthefly.server.discovery import list_sessions
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.distributed.ranks import launched


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _data(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["type"] == "reply", reply
    return dict(reply["data"])


@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_one_client_steers_both_ranks_together(
    strategy: str, onthefly_home: Path, tmp_path: Path
) -> None:
    args = ["--out", str(tmp_path), "--strategy", strategy, "--step-sleep", "0.03"]
    with launched(
        "tests.distributed.run_lightning", args, onthefly_home, tmp_path, self_launching=True
    ) as run:
        client = LiveClient(wait_for_session(onthefly_home))
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
        sessions = list_sessions(onthefly_home)
        paused = _data(client.call("pause"))["step"]
        time.sleep(0.5)  # many steps' worth: none may happen while paused
        at_pause = [_lines(tmp_path / f"steps.{rank}.jsonl")[-1]["step"] for rank in (0, 1)]
        health = _data(client.call("health", check="distribution"))
        _data(client.call("set", lr=0.05))
        test = _data(client.call("test"))
        _data(client.call("resume"))
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= paused + 3)
        stopped = _data(client.call("pause"))["step"]
        _data(client.call("stop"))
        assert run.wait() == [0], run.err(0)
        client.wait_event(lambda e: e["type"] == "status" and e["state"] == "finished")
        client.close()

    assert len(sessions) == 1 and len({e["run"] for e in client.events}) == 1
    assert at_pause == [paused, paused]
    assert [f for f in health["findings"] if f["severity"] != "info"] == []
    assert health["findings"][0]["details"]["world_size"] == 2
    assert test["step"] == paused and test["loss"] is not None
    for rank in (0, 1):
        steps = _lines(tmp_path / f"steps.{rank}.jsonl")
        assert [s["step"] for s in steps] == list(range(1, stopped + 1))
        assert {s["lr"] for s in steps if s["step"] <= paused} == {0.1}
        assert {s["lr"] for s in steps if s["step"] > paused} == {0.05}
        assert [t["step"] for t in _lines(tmp_path / f"tests.{rank}.jsonl")] == [paused]
    assert session_files(onthefly_home) == []
    assert "Traceback" not in run.err(0)
