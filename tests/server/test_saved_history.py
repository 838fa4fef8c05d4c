"""A session's history taken out (for an export) and put back (resume, read-only view)."""

from __future__ import annotations

import json
import time
from typing import Any

from onthefly.server import SessionServer
from onthefly.server.broker import Broker
from onthefly.server.runs import series_key, split_of
from onthefly.server.staging import RawEvent
from tests.server.conftest import ask, open_client


def _event(kind: str, **payload: Any) -> RawEvent:
    return ("main", kind, time.time(), payload)


def _filled(broker: Broker) -> None:
    info = {"run": "main", "project": "p", "name": "main", "state": "running", "step": 0,
            "epoch": 0, "started_at": 1.0}  # fmt: skip
    broker.publish([("main", "run_started", 1.0, {"info": info})])
    broker.publish([_event("epoch", epoch=0, step=0)])
    for step in range(1, 6):
        broker.publish([_event("metrics", step=step, epoch=0, values={"loss": 1 / step})])
    broker.publish([_event("metrics", split="val", step=5, epoch=0, values={"loss": 0.5})])
    record = {"time": 2.0, "level": "INFO", "logger": "x", "message": "hello"}
    broker.publish([_event("log", record=record)])


def test_split_of_inverts_series_key() -> None:
    for split, name in [("train", "loss"), ("val", "loss"), ("test", "acc"), ("train", "lr/g1")]:
        assert split_of(series_key(split, name)) == (split, name)


def test_history_round_trips_through_another_broker() -> None:
    source = Broker("s1", "p", main_run="main")
    _filled(source)
    saved = source.history()
    assert saved.runs[0].series["loss"].steps == [1, 2, 3, 4, 5]
    assert not saved.runs[0].series["loss"].decimated

    target = Broker("s2", "p", main_run="main")
    target.preload(saved)
    again = target.history()
    assert again.runs == saved.runs
    assert [r.message for r in again.logs] == ["hello"]


def test_a_read_only_server_serves_history_and_refuses_control() -> None:
    source = Broker("s1", "p", main_run="main")
    _filled(source)
    saved = source.history()
    with SessionServer("p", "main", port=0, quiet=True, read_only="read-only view") as server:
        server.preload(saved)
        with open_client(server) as ws:
            status = ask(ws, type="status", id="1")["data"]
            assert (status["step"], status["latest"]["val/loss"]) == (5, 0.5)
            history = ask(ws, type="history", id="2", metric="loss")["data"]["series"]
            assert history["steps"] == [1, 2, 3, 4, 5]
            refused = ask(ws, type="pause", id="3")
            assert refused["error"] == {"code": "unsupported", "message": "read-only view"}
            assert json.dumps(refused)
