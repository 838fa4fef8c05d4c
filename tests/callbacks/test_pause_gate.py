"""PauseGate on a training running in a real subprocess, driven by a real websocket client."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest

from onthefly.callbacks.pause_gate import keep_alive_wanted
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.callbacks.subprocess_run import Training, training


def train_steps(client: LiveClient) -> list[int]:
    return [e["step"] for e in client.of("metrics", split="train")]


def assert_clean_exit(run: Training, home: Path, code: int = 0) -> None:
    assert run.wait() == code, run.stderr()
    assert session_files(home) == []
    assert "Traceback" not in run.stderr() and "Exception in thread" not in run.stderr()


def pause_when_running(client: LiveClient, run: Training) -> int:
    """Pause after step 3 was seen; returns the acknowledged step (checked against arrival)."""
    client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
    sent = time.time()
    reply = client.call("pause")
    assert reply["type"] == "reply", reply
    ack = reply["data"]["step"]
    arrived = run.step_running_at(sent, rank=0 if run.ranks > 1 else None)
    # Effective when the step in progress ends: at most one more step.
    assert arrived - 1 <= ack <= arrived + 1, (arrived, ack)
    assert reply["data"]["state"] == "paused"
    assert (
        client.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")["step"] == ack
    )
    return int(ack)


def test_pause_resume_stop(onthefly_home: Path, tmp_path: Path) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        ack = pause_when_running(client, run)

        time.sleep(1.0)  # ~20 steps' worth: none may happen while paused
        assert max(train_steps(client)) == ack
        assert run.last_started() <= ack + 1

        resumed = client.call("resume")
        assert resumed["data"]["state"] == "running"
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= ack + 3)
        assert train_steps(client) == list(range(1, len(train_steps(client)) + 1))

        stopped = client.call("stop")
        assert (stopped["data"]["state"], stopped["data"]["stopping"]) == ("stopping", True)
        assert_clean_exit(run, onthefly_home)
        assert f"FIT RETURNED {stopped['data']['step']} ON RANK 0" in run.stdout()
        assert client.wait_event(lambda e: e.get("state") == "finished")
        client.close()


def test_stop_while_paused(onthefly_home: Path, tmp_path: Path) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        ack = pause_when_running(client, run)
        assert client.call("stop")["type"] == "reply"
        assert_clean_exit(run, onthefly_home)
        assert f"FIT RETURNED {ack} ON RANK 0" in run.stdout()
        client.close()


def test_ctrl_c_while_training_and_while_paused(onthefly_home: Path, tmp_path: Path) -> None:
    for paused in (False, True):
        folder = tmp_path / f"paused-{paused}"
        folder.mkdir()
        with training(onthefly_home, folder, "--step-sleep", "0.05") as run:
            client = LiveClient(wait_for_session(onthefly_home))
            if paused:
                pause_when_running(client, run)
            else:
                client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
            run.interrupt()
            # Lightning ends an interrupted fit with exit status 1, after its clean shutdown.
            assert_clean_exit(run, onthefly_home, code=1)
            assert "KeyboardInterrupt" in run.stderr()
            client.close()


@pytest.mark.parametrize(
    ("argument", "env", "clients", "expected"),
    [
        (True, "0", False, True),  # an explicit argument wins
        (False, "1", True, False),
        (None, "1", False, True),  # then the environment
        (None, "0", True, False),
        (None, "", True, True),  # then a connected client (stdin is not a terminal here)
        (None, "", False, False),
    ],
)
def test_keep_alive_decision(
    argument: bool | None, env: str, clients: bool, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", env)
    monkeypatch.setattr("sys.stdin", io.StringIO())
    assert keep_alive_wanted(argument, clients) is expected


def test_a_bad_keep_alive_value_is_reported_and_ignored(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", "yes")
    monkeypatch.setattr("sys.stdin", io.StringIO())
    assert keep_alive_wanted(None, has_clients=True) is True
    assert "ONTHEFLY_KEEP_ALIVE='yes' is ignored: expected 0 or 1" in caplog.text


def test_all_ranks_of_a_distributed_run_pause_resume_and_stop_together(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05", ranks=2) as run:
        client = LiveClient(wait_for_session(onthefly_home, timeout=120))
        ack = pause_when_running(client, run)
        time.sleep(1.0)
        assert max(train_steps(client)) == ack
        assert run.last_started(rank=0) <= ack + 1 and run.last_started(rank=1) <= ack + 1

        assert client.call("resume")["data"]["state"] == "running"
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= ack + 3)
        stopped = client.call("stop")["data"]["step"]
        assert_clean_exit(run, onthefly_home)
        for rank in (0, 1):
            assert f"FIT RETURNED {stopped} ON RANK {rank}" in run.stdout()
        client.close()
