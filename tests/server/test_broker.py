"""The broker without sockets: numbering, state, backfill, routing, errors."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from onthefly.protocol import SERVER_MESSAGE
from onthefly.server.broker import Broker, Client
from onthefly.server.staging import EVENT_MODELS, RawEvent
from tests.golden import example_files, load_strict, tag_of


def _broker(**kwargs: Any) -> Broker:
    broker = Broker("s1", "proj", main_run="main", **kwargs)
    broker.publish([_started("main")])
    return broker


def _started(run: str, parent: str | None = None) -> RawEvent:
    info = {
        "run": run,
        "project": "proj",
        "name": run,
        "parent": parent,
        "state": "running",
        "step": 0,
        "epoch": 0,
        "started_at": 1.0,
    }
    return (run, "run_started", 1.0, {"info": info})


def _metrics(step: int, run: str = "main", **values: float | None) -> RawEvent:
    return (run, "metrics", 2.0, {"step": step, "epoch": 0, "values": values or {"loss": step}})


def _read(client: Client) -> list[dict[str, Any]]:
    frames = client.outbox.take(timeout=0)
    assert frames is not None
    return [json.loads(frame) for frame in frames]


def _send(broker: Broker, client: Client, **command: Any) -> list[dict[str, Any]]:
    broker.receive(client, json.dumps(command), now=time.monotonic())
    return _read(client)


def _seqs(messages: list[dict[str, Any]]) -> list[int]:
    return [event["seq"] for m in messages if m["type"] == "batch" for event in m["events"]]


def test_hello_comes_first() -> None:
    broker = _broker()
    (hello,) = _read(broker.connect())
    assert hello["type"] == "hello"
    assert hello["session"] == "s1" and hello["project"] == "proj"


def test_seq_starts_at_one_and_invalid_events_get_none() -> None:
    broker = Broker("s1", "proj", main_run="main")
    client = broker.connect()
    _read(client)
    broker.publish([_started("main")])
    assert broker.seq == 1
    _send(broker, client, type="subscribe", id="sub")
    broker.publish([_metrics(1), ("main", "metrics", 3.0, {"step": "x"}), _metrics(2)])
    messages = _read(client)
    events = [e for m in messages for e in m["events"]]
    assert [e["seq"] for e in events] == [2, 3, 4]
    # The bad event is reported (once) as a warning log event, never numbered itself.
    assert [e["type"] for e in events] == ["metrics", "log", "metrics"]
    assert events[1]["record"]["level"] == "WARNING"
    assert "'step'" in events[1]["record"]["message"]
    broker.publish([("main", "metrics", 3.0, {"step": "x"})])  # same problem: said once
    broker.publish([("ghost", "status", 3.0, {"state": "paused", "step": 0, "epoch": 0})])
    ghost = [e for m in _read(client) for e in m["events"]]
    assert [e["type"] for e in ghost] == ["log"]
    assert "unknown run 'ghost'" in ghost[0]["record"]["message"]


def test_snapshot_then_live_stream_without_gap_or_duplicate() -> None:
    broker = _broker()
    broker.publish([_metrics(step) for step in range(1, 11)])
    client = broker.connect()
    _read(client)
    reply, snapshot = _send(broker, client, type="subscribe", id="s")
    assert reply == {"type": "reply", "id": "s", "data": {"mode": "snapshot", "seq": 11}}
    assert snapshot["type"] == "snapshot" and snapshot["seq"] == 11
    (run,) = snapshot["runs"]
    assert run["series"]["loss"]["steps"] == list(range(1, 11))
    assert run["step"] == 10 and run["latest"] == {"loss": 10.0}
    broker.publish([_metrics(11), _metrics(12)])
    assert _seqs(_read(client)) == [12, 13]


def test_snapshot_carries_decimated_history_epochs_and_log_tail() -> None:
    broker = _broker()
    broker.publish([_metrics(step) for step in range(1000)])
    broker.publish([("main", "epoch", 3.0, {"epoch": 1, "step": 1000})])
    broker.publish(
        [
            (
                "main",
                "metrics",
                3.0,
                {"split": "val", "step": 1000, "epoch": 1, "values": {"loss": 0.5}},
            )
        ]
    )
    record = {"time": 1.0, "level": "INFO", "logger": "x", "message": "hi"}
    broker.publish([("main", "log", 3.0, {"record": record})] * 600)
    client = broker.connect()
    _read(client)
    _, snapshot = _send(broker, client, type="subscribe", id="s", max_points=50)
    (run,) = snapshot["runs"]
    assert run["series"]["loss"]["decimated"] and len(run["series"]["loss"]["steps"]) <= 50
    assert run["series"]["val/loss"]["values"] == [0.5]
    assert run["latest"]["val/loss"] == 0.5
    assert run["epoch_starts"] == [1000] and run["epoch"] == 1
    assert len(snapshot["logs"]) == 500


def test_replay_since_a_seq_still_in_the_ring() -> None:
    broker = _broker()
    broker.publish([_metrics(step) for step in range(1, 21)])
    client = broker.connect()
    _read(client)
    messages = _send(broker, client, type="subscribe", id="s", since=15)
    assert messages[0]["data"] == {"mode": "replay", "seq": 21}
    assert _seqs(messages) == [16, 17, 18, 19, 20, 21]
    up_to_date = _send(broker, client, type="subscribe", id="t", since=21)
    assert up_to_date[0]["data"]["mode"] == "replay" and _seqs(up_to_date) == []


@pytest.mark.parametrize("since", [2, 99])
def test_snapshot_when_the_ring_lost_events_or_since_is_unknown(since: int) -> None:
    broker = _broker(ring_size=5)
    broker.publish([_metrics(step) for step in range(1, 21)])
    client = broker.connect()
    _read(client)
    messages = _send(broker, client, type="subscribe", id="s", since=since)
    assert messages[0]["data"] == {"mode": "snapshot", "seq": 21}
    assert messages[1]["type"] == "snapshot"


def test_unsubscribe_stops_the_stream() -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    _send(broker, client, type="subscribe", id="s")
    (reply,) = _send(broker, client, type="unsubscribe", id="u")
    assert reply["type"] == "reply"
    broker.publish([_metrics(1)])
    assert _read(client) == []


def test_status_answers_from_published_events_only() -> None:
    broker = _broker()
    broker.publish(
        [
            _started("fork", parent="main"),
            _metrics(5, loss=0.25),
            ("main", "status", 3.0, {"state": "paused", "step": 5, "epoch": 0}),
        ]
    )
    client = broker.connect()
    _read(client)
    (reply,) = _send(broker, client, type="status", id="st")
    data = reply["data"]
    assert [r["run"] for r in data["runs"]] == ["main", "fork"]
    assert data["runs"][1]["parent"] == "main"
    assert (data["run"], data["state"], data["step"], data["latest"]) == (
        "main",
        "paused",
        5,
        {"loss": 0.25},
    )
    assert data["seq"] == 4
    (fork,) = _send(broker, client, type="status", id="f", run="fork")
    assert fork["data"]["state"] == "running"


def test_history_full_zoomed_and_decimated() -> None:
    broker = _broker()
    broker.publish([_metrics(step, loss=float(step % 7)) for step in range(10_000)])
    client = broker.connect()
    _read(client)
    (full,) = _send(broker, client, type="history", id="h", metric="loss", max_points=20_000)
    assert len(full["data"]["series"]["steps"]) == 10_000
    (zoom,) = _send(broker, client, type="history", id="z", metric="loss", start=100, end=199)
    assert zoom["data"]["series"]["steps"] == list(range(100, 200))
    (small,) = _send(broker, client, type="history", id="d", metric="loss", max_points=100)
    series = small["data"]["series"]
    assert series["decimated"] and len(series["steps"]) <= 100
    assert series["steps"][0] == 0 and series["steps"][-1] == 9_999
    (absent,) = _send(broker, client, type="history", id="a", metric="nope")
    assert absent["data"]["series"]["steps"] == []


@pytest.mark.parametrize("command", ["status", "history", "pause", "subscribe"])
def test_unknown_run_is_an_error(command: str) -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    extra = {"metric": "loss"} if command == "history" else {}
    (error,) = _send(broker, client, type=command, id="x", run="ghost", **extra)
    assert error["type"] == "error" and error["id"] == "x"
    assert error["error"]["code"] == "unknown_run"
    assert "'main'" in error["error"]["message"]


def test_control_commands_go_to_the_inbox_and_replies_come_back() -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    assert _send(broker, client, type="pause", id="p") == []
    pending = broker.inbox.get_nowait()
    assert pending.command.type == "pause" and pending.run == "main"
    pending.relay({"state": "paused", "step": 3})
    pending.relay({"state": "ignored"})  # only the first answer counts
    assert _read(client) == [{"type": "reply", "id": "p", "data": {"state": "paused", "step": 3}}]
    assert pending.answered


def test_failed_and_unserialisable_replies_are_errors() -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    _send(broker, client, type="resume", id="r")
    _send(broker, client, type="test", id="t")
    broker.inbox.get_nowait().fail("invalid_state", "the run is running; expected paused")
    broker.inbox.get_nowait().relay({"model": object()})
    failed, broken = _read(client)
    assert failed["error"] == {
        "code": "invalid_state",
        "message": "the run is running; expected paused",
    }
    assert broken["id"] == "t" and broken["error"]["code"] == "internal"


def test_pending_commands_get_session_closed_at_close() -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    _send(broker, client, type="stop", id="s")
    pending = broker.inbox.get_nowait()
    broker.close()
    (closed,) = _read(client)
    assert closed["error"]["code"] == "session_closed" and closed["id"] == "s"
    pending.relay({"state": "finished"})  # the training thread answers late: ignored, no error
    assert _read(client) == []
    (refused,) = _send(broker, client, type="pause", id="late")
    assert refused["error"]["code"] == "session_closed"


def test_floods_are_rate_limited_and_serving_goes_on() -> None:
    broker = _broker(rate=5.0)
    client = broker.connect()
    _read(client)
    for n in range(20):
        broker.receive(client, json.dumps({"type": "ping", "id": str(n)}), now=0.0)
    messages = _read(client)
    assert sum(m["type"] == "reply" for m in messages) == 10  # the burst
    limited = [m for m in messages if m["type"] == "error"]
    assert len(limited) == 10 and limited[0]["error"]["code"] == "rate_limited"
    assert [m["id"] for m in limited] == [str(n) for n in range(10, 20)]
    broker.receive(client, json.dumps({"type": "ping", "id": "later"}), now=1.0)
    assert _read(client)[0]["type"] == "reply"


def test_slow_subscriber_is_coalesced_while_a_fast_one_gets_everything() -> None:
    broker = _broker(outbox_events=100)
    slow, fast = broker.connect(), broker.connect()
    for client in (slow, fast):
        _read(client)
        _send(broker, client, type="subscribe", id="s")
    received: list[int] = []
    for start in range(2, 1002, 50):
        broker.publish([_metrics(step) for step in range(start, start + 50)])
        received += _seqs(_read(fast))
    assert received == list(range(2, 1002))
    messages = _read(slow)
    coalesced = [m for m in messages if m["type"] == "coalesced"]
    assert coalesced and sum(m["dropped"] for m in coalesced) + len(_seqs(messages)) == 1000


def test_a_second_exclusive_command_is_busy_until_the_first_is_answered() -> None:
    broker = _broker()
    client = broker.connect()
    _read(client)
    assert _send(broker, client, type="health", id="1", check="gradients") == []
    [busy] = _send(broker, client, type="health", id="2", check="determinism")
    assert busy["error"]["code"] == "busy" and busy["id"] == "2"
    assert _send(broker, client, type="test", id="3") == []  # another kind is not busy
    assert _send(broker, client, type="set", id="4", lr=0.1) == []
    assert _send(broker, client, type="set", id="5", lr=0.2) == []  # not exclusive
    first = broker.inbox.get_nowait()
    first.relay({"check": "gradients"})
    assert _read(client)[0]["id"] == "1"
    assert _send(broker, client, type="health", id="6", check="determinism") == []


def test_snapshot_keeps_hparam_changes_and_the_latest_health_result_per_check() -> None:
    broker = _broker()
    change = {"step": 3, "optimizer": 0, "group": 0, "name": "lr", "old": 0.1, "new": 0.01}
    result = {"check": "gradients", "findings": [], "duration": 0.1}
    broker.publish(
        [
            ("main", "hparam_change", 2.0, change),
            ("main", "health_result", 2.0, {**result, "step": 3}),
            ("main", "health_result", 2.0, {**result, "step": 5}),
        ]
    )
    client = broker.connect()
    _read(client)
    _, snapshot = _send(broker, client, type="subscribe", id="1")
    [run] = snapshot["runs"]
    assert [{k: c[k] for k in change} for c in run["hparam_changes"]] == [change]
    assert [(h["check"], h["step"]) for h in run["health"]] == [("gradients", 5)]


def test_snapshot_and_history_keep_the_latest_lineage() -> None:
    # A dashboard that connects after a fork, and a viewer of an exported session, both draw
    # the lineage from the snapshot: only the latest one published on the run is kept.
    lineage = load_strict(
        next(p for p in example_files("valid", "server") if p.name == "lineage.json")
    )
    payload = {k: lineage[k] for k in ("active", "nodes", "edges")}
    broker = _broker()
    broker.publish([("main", "lineage", 2.0, {**payload, "active": "baseline"})])
    broker.publish([("main", "lineage", 3.0, payload)])
    client = broker.connect()
    _read(client)
    _, snapshot = _send(broker, client, type="subscribe", id="1")
    [run] = snapshot["runs"]
    assert run["lineage"]["active"] == "merge-1" and run["lineage"]["edges"] == lineage["edges"]
    viewer = _broker()
    viewer.preload(broker.history())
    [kept] = viewer.history().runs
    assert kept.lineage is not None and kept.lineage.active == "merge-1"


def test_events_are_serialised_as_the_server_message_union_would() -> None:
    # The broker writes each event with its model's own serializer (faster than the union's):
    # byte for byte what SERVER_MESSAGE writes, for every event type's golden example.
    examples = [p for p in example_files("valid", "server") if tag_of(p) in EVENT_MODELS]
    assert {tag_of(p) for p in examples} == set(EVENT_MODELS)
    envelope = ("v", "type", "session", "seq", "time", "run")
    for path in examples:
        data = load_strict(path)
        broker = _broker()
        client = broker.connect()
        broker.receive(client, '{"type": "subscribe", "id": "1"}', now=0.0)
        _read(client)
        run = "other" if data["type"] == "run_started" else "main"
        payload = {k: v for k, v in data.items() if k not in envelope}
        broker.publish([(run, data["type"], data["time"], payload)])
        [frame] = client.outbox.take(timeout=0) or []
        prefix, suffix = b'{"type":"batch","events":[', b"]}"
        assert frame.startswith(prefix) and frame.endswith(suffix), path.name
        sent = frame[len(prefix) : -len(suffix)]
        assert SERVER_MESSAGE.dump_json(SERVER_MESSAGE.validate_json(sent)) == sent, path.name


def test_history_keeps_every_point_unless_asked_to_bound_the_total() -> None:
    broker = _broker()
    broker.publish([_metrics(step, loss=float(step), acc=0.5) for step in range(1000)])
    broker.publish([_metrics(step, lr=0.1) for step in range(10)])
    full = broker.history()
    assert {k: len(s.steps) for k, s in full.runs[0].series.items()} == {
        "loss": 1000,
        "acc": 1000,
        "lr": 10,
    }
    bounded = broker.history(max_total_points=300)
    series = bounded.runs[0].series
    assert sum(len(s.steps) for s in series.values()) <= 300
    assert series["loss"].decimated and max(series["loss"].values) == 999.0  # spikes kept
    assert not series["lr"].decimated and len(series["lr"].steps) == 10
    roomy = broker.history(max_total_points=5000)  # within the bound: every point
    assert roomy.runs[0].series == full.runs[0].series
