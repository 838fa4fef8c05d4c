"""onthefly.connect against a real session server and a stand-in training thread."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.sync.server import ServerConnection, serve

import onthefly
from onthefly.client import Client, connect
from onthefly.errors import (
    AmbiguousSession,
    AuthenticationError,
    CommandError,
    ConfigurationError,
    SessionGone,
    SessionNotFound,
)
from onthefly.protocol import SERVER_MESSAGE, Coalesced, Hello, PingReply, Snapshot, StatusReply
from onthefly.server.discovery import SessionFile, sessions_dir, write_session
from tests.live_session import Training, live_session, session_file


@pytest.fixture
def training() -> Iterator[Training]:
    with live_session() as t:
        yield t


@pytest.fixture
def client(training: Training) -> Iterator[Client]:
    with connect() as c:
        yield c


# ---------------------------------------------------------------------- finding the session


def test_lazy_export_is_the_client_connect() -> None:
    assert onthefly.connect is connect


@pytest.mark.parametrize("how", ["name", "project/run", "port", "omitted"])
def test_run_is_found_by_name_project_run_port_or_omitted(training: Training, how: str) -> None:
    run = {
        "name": "baseline",
        "project/run": "mnist/baseline",
        "port": str(training.server.port),
        "omitted": None,
    }[how]
    with connect(run) as c:
        assert c.session.port == training.server.port
        assert c.hello.project == "mnist"
        assert c.status()["run"] == training.run


def test_no_live_session_says_where_it_looked_and_how_to_start_one() -> None:
    with pytest.raises(SessionNotFound) as raised:
        connect()
    assert str(sessions_dir()) in str(raised.value)
    assert "start a training script" in str(raised.value)


def test_unknown_run_lists_the_live_sessions(training: Training) -> None:
    with pytest.raises(SessionNotFound, match=r"'resnet'.*mnist/baseline \(port \d+"):
        connect("resnet")


def test_same_run_name_in_two_projects_is_ambiguous_until_named_fully() -> None:
    with live_session("mnist", "baseline") as a, live_session("cifar", "baseline") as b:
        for run in ("baseline", None):
            with pytest.raises(AmbiguousSession, match=r"mnist/baseline.*cifar/baseline"):
                connect(run)
        with connect("cifar/baseline") as c:
            assert c.session.port == b.server.port
        with connect(str(a.server.port)) as c:
            assert c.hello.project == "mnist"


def test_dead_process_discovery_file_is_not_a_session(training: Training) -> None:
    stale = SessionFile(2**22 + 12345, 1, "t", "old", "ghost", 0.0, "s", "u")
    write_session(stale)
    with pytest.raises(SessionNotFound):
        connect("ghost")
    with connect() as c:  # the stale file does not make "one live session" ambiguous
        assert c.session.run == "baseline"


def test_tampered_token_is_refused(training: Training) -> None:
    path = session_file(training)
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "token": "not-the-token"}))
    with pytest.raises(AuthenticationError, match="refused the token"):
        connect()


# ---------------------------------------------------------------------- commands


def test_status_reports_state_step_epoch_and_latest_metrics(
    training: Training, client: Client
) -> None:
    training.train(3)
    deadline = time.monotonic() + 5
    while (status := client.status())["step"] != 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the server's pump drains the publish buffer every ~15 ms
    assert status["state"] == "running"
    assert (status["step"], status["epoch"]) == (3, 0)
    assert status["latest"] == {"loss": pytest.approx(1 / 3), "acc": None}


def test_pause_resume_report_the_step_they_took_effect(training: Training, client: Client) -> None:
    training.train(5)
    assert client.pause() == {"state": "paused", "step": 5, "epoch": 0}
    assert client.resume(steps=10) == {"state": "running", "step": 5, "epoch": 0}
    assert training.state == "running"


def test_command_error_carries_the_protocol_code(client: Client) -> None:
    with pytest.raises(CommandError) as raised:
        client.resume()
    assert raised.value.code == "invalid_state"
    assert "expected paused" in raised.value.message


def test_stop_and_test(training: Training, client: Client) -> None:
    training.train(2)
    assert client.test(label="warm") == {
        "label": "warm",
        "step": 2,
        "loss": 0.25,
        "metrics": {"test_acc": 0.75},
        "duration": 0.5,
    }
    assert client.test()["label"] == "test_2"
    assert client.stop()["state"] == "finished"


def test_out_of_range_arguments_fail_before_sending(training: Training, client: Client) -> None:
    with pytest.raises(ConfigurationError, match="steps"):
        client.resume(steps=0)
    assert not training.got_command.is_set()


def test_ping_and_history(training: Training, client: Client) -> None:
    training.train(20)
    assert client.ping()["seq"] >= 0
    deadline = time.monotonic() + 5
    while len((h := client.history("loss", start=11))["series"]["steps"]) < 10:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert h["series"]["steps"] == list(range(11, 21))
    assert h["series"]["values"][0] == pytest.approx(1 / 11)


def test_any_command_goes_by_its_type_and_its_reply_is_its_model(
    training: Training, client: Client
) -> None:
    status = StatusReply.model_validate(client.request("status"))
    assert (status.run, status.state) == (training.run, "running")
    assert PingReply.model_validate(client.request("ping")).seq >= 1
    with pytest.raises(ConfigurationError, match=r"invalid 'jump' arguments"):
        client.request("jump")


# ---------------------------------------------------------------------- watch


def test_watch_yields_snapshot_then_every_event_in_order_until_finished(
    training: Training, client: Client
) -> None:
    training.train(3)
    seen: list[Any] = []
    for message in client.watch():
        seen.append(message)
        if isinstance(message, Snapshot):
            training.train(500)  # enough to arrive as batch frames
            training.finish()
    snapshot, events = seen[0], seen[1:]
    assert isinstance(snapshot, Snapshot)
    assert not any(isinstance(m, Coalesced) for m in events)
    seqs = [m.seq for m in events]
    assert seqs == list(range(snapshot.seq + 1, snapshot.seq + 1 + len(events)))
    assert [m.step for m in events if m.type == "metrics"][-1] == 503
    assert events[-1].type == "status" and events[-1].state == "finished"
    assert client.ping()  # the connection stays usable after watching


def test_watch_of_a_finished_run_ends_after_the_snapshot(
    training: Training, client: Client
) -> None:
    training.finish()
    while client.status()["state"] != "finished":
        time.sleep(0.01)
    (only,) = list(client.watch())
    assert isinstance(only, Snapshot)


def test_commands_from_another_thread_while_watching(training: Training, client: Client) -> None:
    replies: list[dict[str, Any]] = []
    for message in client.watch():
        if isinstance(message, Snapshot):
            worker = threading.Thread(target=lambda: replies.append(client.stop()))
            worker.start()
    worker.join()
    assert replies == [{"state": "finished", "step": 0, "epoch": 0}]


def test_watch_ends_when_the_session_closes(training: Training, client: Client) -> None:
    seen = []
    for message in client.watch():
        seen.append(message.type)
        if message.type == "snapshot":
            training.server.close()
    assert seen == ["snapshot"]


# ---------------------------------------------------------------------- the session goes away


def test_session_closing_during_a_pending_pause_raises_session_gone(
    training: Training, client: Client
) -> None:
    training.hold = True
    outcome: list[BaseException] = []

    def pause() -> None:
        try:
            client.pause()
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=pause)
    worker.start()
    assert training.got_command.wait(5)
    training.server.close()
    worker.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], SessionGone)
    assert "did not take effect" in str(outcome[0])
    with pytest.raises(SessionGone):
        client.ping()


def test_connection_dropped_mid_command_raises_session_gone() -> None:
    """A server that vanishes without answering: the command fails, it does not hang."""
    hello = Hello(session="s", server="test", project="p", time=time.time())

    def handler(ws: ServerConnection) -> None:
        ws.send(SERVER_MESSAGE.dump_json(hello).decode())
        ws.recv()
        ws.close()

    with serve(handler, "127.0.0.1", 0) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        port = server.socket.getsockname()[1]
        write_session(SessionFile(os.getpid(), port, "t", "p", "r", time.time(), "s", "u"))
        with connect("r") as c, pytest.raises(SessionGone, match="connection closed"):
            c.pause()
        server.shutdown()
