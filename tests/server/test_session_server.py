"""The session server end to end: lifecycle, discovery, streaming, commands, shutdown."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError
from tqdm import tqdm

from onthefly.errors import ConfigurationError
from onthefly.protocol import MetricsBody, RunInfo, RunStartedBody, StatusBody
from onthefly.server import SessionServer
from onthefly.server.discovery import list_sessions, sessions_dir
from tests import interruptible

from .conftest import answer, ask, open_client, recv

REPO = Path(__file__).resolve().parents[2]


def _publish_steps(server: SessionServer, start: int, count: int) -> None:
    for step in range(start, start + count):
        server.publish(
            server.main_run, MetricsBody(step=step, epoch=0, values={"loss": 1 / (1 + step)})
        )


# --------------------------------------------------------------------------- lifecycle


def test_start_prints_the_address_and_each_new_kind_of_dashboard_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with SessionServer("proj", "main", port=0) as server:
        assert server.url == f"http://127.0.0.1:{server.port}/?token={server.token}"
        assert len(server.token) >= 32
        browser = {"Origin": f"http://127.0.0.1:{server.port}"}
        vscode = {"User-Agent": "onthefly-vscode"}
        # A script, a browser tab and its reconnects, then VS Code twice.
        for headers in ({}, browser, browser, vscode, vscode):
            with open_client(server, additional_headers=headers):
                pass
    lines = capsys.readouterr().out.splitlines()
    address = f"ws://127.0.0.1:{server.port}"
    assert lines == [
        f"[onthefly] dashboard: {server.url}",
        f"[onthefly] dashboard connected (browser) on {address}",
        f"[onthefly] dashboard connected (VS Code) on {address}",
    ]


def test_console_lines_go_above_a_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    bar = tqdm(total=10, file=sys.stderr, desc="Epoch 0")
    try:
        bar.update(3)
        with SessionServer("proj", "main", port=0):
            pass
        bar.update(3)
    finally:
        bar.close()
    captured = capsys.readouterr()
    assert captured.out.startswith("[onthefly] dashboard: http://127.0.0.1:")
    # tqdm cleared the bar for the line and drew it again after: no line broken in two.
    assert captured.err.count("Epoch 0") >= 2 and "[onthefly]" not in captured.err


def test_quiet_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with SessionServer("proj", "main", port=0, quiet=True) as server, open_client(server):
        pass
    assert capsys.readouterr().out == ""


def test_only_loopback_is_allowed() -> None:
    with pytest.raises(ConfigurationError, match=r"expected '127\.0\.0\.1'"):
        SessionServer("proj", "main", host="0.0.0.0")


def test_port_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONTHEFLY_PORT", "not-a-port")
    with pytest.raises(ConfigurationError, match="ONTHEFLY_PORT='not-a-port'"):
        SessionServer("proj", "main")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    monkeypatch.setenv("ONTHEFLY_PORT", str(free))
    with SessionServer("proj", "main", quiet=True) as server:
        assert server.port == free


def test_two_sessions_on_one_port_get_their_own_ports() -> None:
    with (
        SessionServer("a", "r", port=0, quiet=True) as first,
        SessionServer("b", "r", port=first.port, quiet=True) as second,
    ):
        assert second.port > first.port
        assert {s.port for s in list_sessions()} == {first.port, second.port}


def test_discovery_file_lives_as_long_as_the_session(onthefly_home: Path) -> None:
    server = SessionServer("proj", "baseline", port=0, quiet=True).start()
    path = sessions_dir() / f"{os.getpid()}-{server.port}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(sessions_dir().stat().st_mode) == 0o700
    data = json.loads(path.read_text())
    assert (data["pid"], data["port"], data["token"]) == (os.getpid(), server.port, server.token)
    assert (data["project"], data["run"], data["url"]) == ("proj", "baseline", server.url)
    server.close()
    server.close()  # idempotent
    assert not path.exists()


@pytest.mark.parametrize(
    "ending", ["raise KeyboardInterrupt", "raise RuntimeError('boom')", "pass"]
)
def test_discovery_file_is_removed_however_the_script_ends(
    onthefly_home: Path, ending: str
) -> None:
    script = textwrap.dedent(f"""
        from onthefly.server import SessionServer
        server = SessionServer("proj", "run", port=0, quiet=True).start()
        print(server.port, flush=True)
        {ending}
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ONTHEFLY_HOME": str(onthefly_home)},
    )
    assert proc.stdout.strip().isdigit()
    assert list(sessions_dir().glob("*.json")) == []


def test_demo_exits_cleanly_on_ctrl_c(onthefly_home: Path) -> None:
    with subprocess.Popen(
        interruptible.command(str(REPO / "examples" / "demo.py"), python_flags=("-u",)),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "ONTHEFLY_HOME": str(onthefly_home), "ONTHEFLY_PORT": "0"},
    ) as proc:  # the with closes the pipes, also after a failed check
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("[onthefly] dashboard: http://127.0.0.1:")
            (session,) = list_sessions()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
        finally:
            proc.kill()
    assert proc.returncode == 0, f"exit status {proc.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    assert "Traceback" not in err, err
    assert session.pid == proc.pid
    assert list(sessions_dir().glob("*.json")) == []


# --------------------------------------------------------------------------- streaming


def test_live_stream_has_no_gap_or_duplicate_across_reconnects(server: SessionServer) -> None:
    total = 3000
    done = threading.Event()

    def train() -> None:
        for start in range(0, total, 100):
            _publish_steps(server, start, 100)
            done.wait(0.003)
        done.set()

    trainer = threading.Thread(target=train)
    trainer.start()
    expected = 1  # the next seq this client must see: no gap, no duplicate
    modes = []
    for attempt in range(6):
        with open_client(server) as ws:
            since = {} if attempt % 3 == 0 else {"since": expected - 1}
            reply = ask(ws, type="subscribe", id="s", **since)
            modes.append(reply["data"]["mode"])
            if reply["data"]["mode"] == "snapshot":
                snapshot = recv(ws)
                assert snapshot["seq"] == reply["data"]["seq"] >= expected - 1
                expected = snapshot["seq"] + 1
            if expected > total + 1:
                continue  # a loaded machine may finish training before this reconnect
            for event in recv(ws)["events"]:
                assert event["seq"] == expected
                expected += 1
    trainer.join()
    with open_client(server) as ws:
        ask(ws, type="subscribe", id="s", since=expected - 1)
        while expected <= total + 1:
            for event in recv(ws)["events"]:
                assert event["seq"] == expected
                expected += 1
    assert expected == total + 2
    assert modes == ["snapshot", "replay", "replay"] * 2


def test_add_run_announces_a_child_run(server: SessionServer) -> None:
    with open_client(server) as ws:
        ask(ws, type="subscribe", id="s")
        recv(ws)
        fork = server.add_run("main", parent=server.main_run)
        assert fork == "main-2"
        (event,) = recv(ws)["events"]
        assert event["type"] == "run_started"
        assert event["info"]["parent"] == server.main_run and event["run"] == fork
        server.publish(fork, StatusBody(state="paused", step=0, epoch=0))
        recv(ws)
        status = ask(ws, type="status", id="st", run=fork)
        assert status["data"]["state"] == "paused"
        assert [r["run"] for r in status["data"]["runs"]] == ["main", "main-2"]


def test_publishing_a_run_start_is_a_clear_error(server: SessionServer) -> None:
    info = RunInfo(run="x", project="p", name="x", state="running", step=0, epoch=0, started_at=1.0)
    with pytest.raises(ConfigurationError, match="expected add_run"):
        server.publish(server.main_run, RunStartedBody(info=info))


def test_events_published_together_arrive_in_order(server: SessionServer) -> None:
    bodies = [MetricsBody(step=step, epoch=0, values={"loss": 1 / step}) for step in range(1, 31)]
    with open_client(server) as ws:
        ask(ws, type="subscribe", id="s")
        server.publish_all(server.main_run, bodies)
        server.publish_all(server.main_run, [])  # nothing to send: not an error
        events: list[dict[str, object]] = []
        while len(events) < 30:
            events += [e for e in recv(ws).get("events", []) if e["type"] == "metrics"]
    assert [e["step"] for e in events] == list(range(1, 31))
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == 30


def test_events_published_together_are_of_one_kind(server: SessionServer) -> None:
    mixed = [
        MetricsBody(step=1, epoch=0, values={}),
        StatusBody(state="paused", step=1, epoch=0),
    ]
    with pytest.raises(ConfigurationError, match="of one kind"):
        server.publish_all(server.main_run, mixed)
    info = RunInfo(run="x", project="p", name="x", state="running", step=0, epoch=0, started_at=1.0)
    with pytest.raises(ConfigurationError, match="add_run"):
        server.publish_all(server.main_run, [RunStartedBody(info=info)])


def test_events_past_the_buffer_are_dropped_and_reported(
    server: SessionServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("onthefly.server.session_server.BUFFER_SIZE", 5)
    bodies = [MetricsBody(step=step, epoch=0, values={}) for step in range(1, 9)]
    with open_client(server) as ws:
        ask(ws, type="subscribe", id="s")
        server.publish_all(server.main_run, bodies)  # the training thread never blocks
        steps: list[int] = []
        warnings: list[str] = []
        while not warnings:
            for event in recv(ws).get("events", []):
                if event["type"] == "metrics":
                    steps.append(event["step"])
                elif event["type"] == "log":
                    warnings.append(event["record"]["message"])
    assert steps == list(range(1, len(steps) + 1)) and 4 <= len(steps) <= 5
    assert f"{8 - len(steps)} events were dropped" in warnings[0]


def test_a_misspelt_event_field_fails_when_the_event_is_built() -> None:
    with pytest.raises(ValidationError, match="stpe"):
        MetricsBody(stpe=3, step=3, epoch=0, values={"loss": 1.0})  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="split"):
        MetricsBody(split="training", step=3, epoch=0, values={})  # type: ignore[arg-type]


def test_has_clients(server: SessionServer) -> None:
    assert not server.has_clients()
    with open_client(server):
        assert server.has_clients()


# --------------------------------------------------------------------------- commands


def test_control_commands_reach_the_inbox_and_their_replies_the_client(
    server: SessionServer,
) -> None:
    with open_client(server) as ws:
        ws.send(json.dumps({"type": "pause", "id": "p1"}))
        pending = server.inbox.get(timeout=5)
        assert pending.command.type == "pause" and pending.run == server.main_run
        threading.Thread(target=pending.relay, args=({"state": "paused", "step": 7},)).start()
        assert answer(ws, "p1") == {
            "type": "reply",
            "id": "p1",
            "data": {"state": "paused", "step": 7},
        }
        ws.send(json.dumps({"type": "resume", "id": "r1"}))
        server.inbox.get(timeout=5).fail("invalid_state", "not paused")
        assert answer(ws, "r1")["error"] == {"code": "invalid_state", "message": "not paused"}


def test_pending_commands_are_answered_session_closed_at_close() -> None:
    server = SessionServer("proj", "main", port=0, quiet=True).start()
    try:
        with open_client(server) as ws:
            ws.send(json.dumps({"type": "stop", "id": "s1"}))
            pending = server.inbox.get(timeout=5)
            server.close()
            closed = answer(ws, "s1")
            assert closed["error"]["code"] == "session_closed"
            pending.relay({"state": "finished"})  # a late answer is ignored, not an error
    finally:
        server.close()


def test_close_flushes_published_events(server: SessionServer) -> None:
    with open_client(server) as ws:
        ask(ws, type="subscribe", id="s")
        recv(ws)
        _publish_steps(server, 0, 50)
        server.close()
        seqs = [e["seq"] for e in recv(ws)["events"]]
        while seqs[-1] < 51:
            seqs += [e["seq"] for e in recv(ws)["events"]]
    assert seqs == list(range(2, 52))
