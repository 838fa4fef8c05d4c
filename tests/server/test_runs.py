"""The run table's alerts, configuration and wall-clock anchors: kept as events arrive,
carried by snapshots, and put back from a saved history (an export being viewed)."""

from __future__ import annotations

from typing import Any

from onthefly.protocol import SERVER_MESSAGE, Snapshot
from onthefly.server.broker import Broker


def publish(broker: Broker, kind: str, at: float, /, **payload: Any) -> None:
    broker.publish([(broker.main_run, kind, at, payload)])


def alert(kind: str, state: str, step: int) -> dict[str, Any]:
    severity = "warning" if kind == "loss_spike" else "error"
    return {"kind": kind, "state": state, "severity": severity, "step": step, "message": kind}


def a_run() -> Broker:
    broker = Broker("s", "p", main_run="r")
    info = {"run": "r", "project": "p", "name": "r", "state": "running", "step": 0, "epoch": 0}
    publish(broker, "run_started", 100.0, info={**info, "started_at": 100.0})
    publish(broker, "config", 100.5, values={"optimizer": "SGD", "lr": 0.1, "batch_size": 32})
    for step in range(1, 41):  # four steps a second
        publish(broker, "metrics", 100.0 + step / 4, step=step, epoch=0, values={"loss": 1.0})
    publish(broker, "alert", 106.0, **alert("loss_spike", "raised", 20))
    publish(broker, "alert", 107.0, **alert("nonfinite_loss", "raised", 30))
    publish(broker, "alert", 108.0, **alert("loss_spike", "cleared", 40))
    return broker


def test_raised_alerts_config_and_clock_are_kept_and_snapshotted() -> None:
    broker = a_run()
    (info,) = broker.run_infos()
    assert info.alerts == ["nonfinite_loss"]
    assert info.config == {"optimizer": "SGD", "lr": 0.1, "batch_size": 32}
    (run,) = broker.history().runs
    assert [(a.kind, a.state) for a in run.alert_history] == [
        ("loss_spike", "raised"),
        ("nonfinite_loss", "raised"),
        ("loss_spike", "cleared"),
    ]
    # An anchor at most every second of training: steps 1, 5, 9, ... (0.25 s apart each).
    assert run.clock.steps == list(range(1, 41, 4))
    assert run.clock.times == [100.0 + s / 4 for s in range(1, 41, 4)]


def test_a_saved_history_puts_alerts_config_and_clock_back() -> None:
    saved = a_run().history()
    wire = Snapshot.model_validate_json(SERVER_MESSAGE.dump_json(saved))
    viewer = Broker("v", "p", main_run="r", read_only="viewing a file")
    viewer.preload(wire)
    (info,) = viewer.run_infos()
    assert info.alerts == ["nonfinite_loss"]
    assert info.config["lr"] == 0.1
    (run,) = viewer.history().runs
    assert len(run.alert_history) == 3
    assert run.clock == saved.runs[0].clock
