"""The lineage DAG: forks, merges, discards, the main run's id, and its state."""

from __future__ import annotations

import io

import torch

from onthefly.forks.lineage import MAIN, Lineage
from onthefly.protocol import SERVER_MESSAGE


def _lineage() -> Lineage:
    lineage = Lineage()
    lineage.add_fork(
        "hard",
        "hard",
        parent_step=40,
        selection={"name": "tail", "criterion": {"kind": "quantile", "q": 0.9}, "size": 8},
        budget={"steps": 100},
        hparams={"lr": 0.001},
    )
    lineage.node("hard").update(status="done", steps=100, slice_loss=0.4)
    return lineage


def test_forks_and_merges_make_a_dag_and_move_the_active_node() -> None:
    lineage = _lineage()
    lineage.add_merge("merge-1", "merge-1", step=40, method="fisher", sources=["hard"])
    tree = lineage.to_json()
    assert tree["active"] == "merge-1"
    status = {n["run"]: n["status"] for n in tree["nodes"]}
    assert status == {MAIN: "superseded", "hard": "done", "merge-1": "active"}
    merge = lineage.node("merge-1")
    assert (merge["parent"], merge["metrics_run"], merge["from_step"]) == (MAIN, MAIN, 40)
    assert [(e["source"], e["target"], e["kind"], e["method"]) for e in tree["edges"]] == [
        (MAIN, "hard", "fork", None),
        (MAIN, "merge-1", "merge", "fisher"),
        ("hard", "merge-1", "merge", "fisher"),
    ]
    # A fork made now branches off the merge, the model the run trains.
    lineage.add_fork("again", "again", parent_step=40, selection={}, budget={}, hparams={})
    assert lineage.node("again")["parent"] == "merge-1"


def test_a_discarded_merge_gives_the_run_back_to_its_parent() -> None:
    lineage = _lineage()
    lineage.add_merge("m1", "m1", step=40, method="soup", sources=["hard"])
    lineage.add_merge("m2", "m2", step=40, method="soup", sources=["hard"])
    assert lineage.discard("m2") == "m1"
    assert lineage.active == "m1" and lineage.node("m1")["status"] == "active"
    assert lineage.discard("m1") == MAIN
    assert lineage.node(MAIN)["status"] == "active"


def test_binding_the_main_run_renames_it_everywhere() -> None:
    lineage = _lineage()
    lineage.add_merge("merge-1", "merge-1", step=40, method="soup", sources=["hard"])
    lineage.bind_main("baseline", "Baseline")
    tree = lineage.to_json()
    assert tree["nodes"][0]["run"] == "baseline" and tree["nodes"][0]["name"] == "Baseline"
    assert lineage.node("hard")["parent"] == "baseline"
    assert lineage.node("merge-1")["metrics_run"] == "baseline"
    assert MAIN not in {e["source"] for e in tree["edges"]}
    lineage.bind_main("baseline")  # idempotent
    assert lineage.main == "baseline"


def test_the_lineage_is_a_valid_event_and_survives_a_weights_only_round_trip() -> None:
    lineage = _lineage()
    lineage.bind_main("run-a")
    lineage.add_merge("merge-1", "merge-1", step=40, method="distill", sources=["hard"])
    event = {"v": 1, "session": "s", "run": "run-a", "seq": 3, "time": 1.0, "type": "lineage"}
    SERVER_MESSAGE.validate_python({**event, **lineage.to_json()})
    buffer = io.BytesIO()
    torch.save(lineage.state_dict(), buffer)
    buffer.seek(0)
    restored = Lineage()
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert restored.to_json() == lineage.to_json() and restored.main == "run-a"
    restored.bind_main("run-b")  # a resumed session's new main run
    assert restored.node("merge-1")["parent"] == "run-b" and restored.active == "merge-1"
