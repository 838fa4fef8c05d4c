"""ForkSpawner beyond the native full-weight fork: adapter forks, Lightning forks, forks in
an export, and the merge's defaults (the validation gate, baselines, narrow slices), in the
live runs of ``tests/forks/live.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.callbacks.live import LiveClient
from tests.forks.live import (
    PAUSE_AT,
    TASK,
    assert_same,
    error,
    lightning_run,
    native_run,
    parent_state,
    reply,
    start_fork,
)

# ---------------------------------------------------------------------------- adapters


def test_adapter_forks_merge_by_folding_their_updates(onthefly_home: Path) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        model = trainer.model
        before = {k: v.clone() for k, v in model.state_dict().items()}
        seen["fork"] = start_fork(client, "lora", adapter_rank=4, lr=1e-2)
        seen["merge"] = reply(client.call("merge", method="adapter", forks=["lora"], force=True))
        after = model.state_dict()
        seen["changed"] = sorted(k for k in before if not torch.equal(before[k], after[k]))

    native_run(onthefly_home, script)
    assert seen["fork"]["status"] == "done" and seen["fork"]["hparams"]["adapter_rank"] == 4
    merged = seen["merge"]
    assert merged["after"]["loss"][0] < merged["before"]["loss"][0]
    assert seen["changed"] == ["0.weight", "3.weight", "5.weight"]  # the Linear weights only


# ---------------------------------------------------------------------------- Lightning


def test_lightning_forks_leave_the_parent_trainer_untouched(onthefly_home: Path) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        module = trainer.lightning_module
        before = parent_state(trainer, module)
        loops = trainer.fit_loop.state_dict()
        metrics = dict(trainer.callback_metrics)
        seen["fork"] = start_fork(client, "hard")
        seen["lora"] = start_fork(client, "lora", adapter_rank=2)
        seen["compare"] = reply(client.call("compare", forks=["hard"]))  # baselines train too
        assert_same(before, parent_state(trainer, module), "parent")
        assert_same(loops, trainer.fit_loop.state_dict(), "loops")
        assert_same(metrics, dict(trainer.callback_metrics), "callback_metrics")
        assert trainer.lightning_module is module and module.trainer is trainer
        seen["merge"] = reply(client.call("merge", method="soup", forks=["hard"], force=True))

    run = lightning_run(onthefly_home, script)
    fork = seen["fork"]
    assert fork["status"] == "done" and fork["steps"] == 20
    assert fork["slice_loss"] < fork["parent_slice_loss"]
    assert seen["lora"]["status"] == "done"
    rows = [r["model"] for r in seen["compare"]["rows"]]
    assert rows == ["main", "hard", "continue-20", "oversample-hard"]
    assert seen["merge"]["after"]["loss"][0] < seen["merge"]["before"]["loss"][0]
    assert run.trainer.global_step == PAUSE_AT + 20
    assert run.client is not None
    metrics = run.client.of("metrics", run=fork["run"])
    first = fork["parent_step"] + 1  # a fork's steps go on from its parent's
    assert [m["step"] for m in metrics] == list(range(first, first + 20))
    assert "train_acc" in metrics[-1]["values"]  # what the fork's training_step logged


# ---------------------------------------------------------------------------- sessions


def test_an_export_keeps_the_lineage_and_the_fork_weights(
    onthefly_home: Path, tmp_path: Path
) -> None:
    path = tmp_path / "forked.otf"
    seen: dict[str, Any] = {}

    def make(client: LiveClient, trainer: Any) -> None:
        start_fork(client, "hard")
        reply(client.call("merge", method="soup", forks=["hard"], force=True))
        seen["lineage"] = reply(client.call("lineage"))
        reply(client.call("export", path=str(path)))

    def read(client: LiveClient, trainer: Any) -> None:
        seen["resumed"] = reply(client.call("lineage"))
        seen["compare"] = reply(client.call("compare", forks=["hard"]))

    native_run(onthefly_home, make)
    native_run(
        onthefly_home, read, resume_from=path, pause_at=PAUSE_AT + 5, max_steps=PAUSE_AT + 10
    )
    saved, resumed = seen["lineage"], seen["resumed"]
    assert [n["name"] for n in resumed["nodes"]] == [n["name"] for n in saved["nodes"]]
    assert resumed["edges"] == saved["edges"] and resumed["active"] == saved["active"]
    rows = seen["compare"]["rows"]
    assert [row["model"] for row in rows] == ["merge-1", "hard"]  # no baselines: moved on
    assert "forked at step 150 from another model" in seen["compare"]["notes"][0]


# ---------------------------------------------------------------------------- defaults


def test_a_merge_worse_on_validation_is_reported_and_not_applied(onthefly_home: Path) -> None:
    """On the synthetic task every soup of parent and specialist (the weights chosen on the
    grid) gets more validation samples wrong: by default it is refused, the parent left bit
    for bit."""
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        model = trainer.model
        start_fork(client, "hard")
        before = parent_state(trainer, model)
        seen["refused"] = reply(client.call("merge", method="soup", forks=["hard"]))
        assert_same(before, parent_state(trainer, model), "parent after a refused merge")
        seen["lineage"] = reply(client.call("lineage"))
        seen["discard"] = error(client.call("discard_merge"))
        seen["tolerated"] = reply(
            client.call("merge", method="soup", forks=["hard"], tolerance=1.0, name="tolerated")
        )
        seen["greedy"] = reply(client.call("merge", method="greedy", forks=["hard"]))

    native_run(onthefly_home, script, max_steps=PAUSE_AT + 1)
    refused = seen["refused"]
    assert refused["applied"] is False and refused["run"] is None
    gate = refused["gate"]
    assert (gate["target"], gate["metric"], gate["tolerance"]) == ("val", "error", 0)
    assert gate["passed"] is False
    val = 2  # the validation column of the before/after table
    assert gate["parent"]["error"] == pytest.approx(1 - refused["before"]["accuracy"][val])
    assert gate["merged"]["error"] == pytest.approx(1 - refused["after"]["accuracy"][val])
    assert gate["merged"]["loss"] == pytest.approx(refused["after"]["loss"][val])
    assert (gate["merged"]["error"], gate["merged"]["loss"]) > (
        gate["parent"]["error"],
        gate["parent"]["loss"],
    )
    assert "it was not applied" in refused["reason"]
    # The weights were chosen on the grid: the best validation score of it.
    grid = refused["grid"]
    assert grid[0]["weights"] == [0.75, 0.25] and len(grid) == 4
    best = min(grid, key=lambda g: g["score"])
    assert refused["choice"] == {"weights": best["weights"]}
    assert best["score"] == pytest.approx(gate["merged"]["error"], abs=1e-6)
    assert [n["name"] for n in seen["lineage"]["nodes"]] == ["main", "hard"]
    assert seen["discard"][0] == "invalid_state"
    tolerated = seen["tolerated"]
    assert tolerated["applied"] is True and tolerated["gate"]["passed"] is True
    assert tolerated["run"] is not None
    greedy = seen["greedy"]  # greedy soup never scores worse than where it starts
    assert greedy["applied"] is True
    assert greedy["gate"]["merged"]["error"] <= greedy["gate"]["parent"]["error"]


def test_compare_baselines_train_copies_and_leave_the_parent_bit_identical(
    onthefly_home: Path,
) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        model = trainer.model
        start_fork(client, "hard")
        before = parent_state(trainer, model)
        seen["compare"] = reply(client.call("compare"))
        seen["plain"] = reply(client.call("compare", baselines=False))
        assert_same(before, parent_state(trainer, model), "parent after the baselines")

    baseline = native_run(onthefly_home)
    compared = native_run(onthefly_home, script)
    assert compared.losses == baseline.losses  # bit for bit, before and after the compare
    rows = {r["model"]: r for r in seen["compare"]["rows"]}
    assert list(rows) == ["main", "hard", "continue-20", "oversample-hard"]
    assert rows["continue-20"]["steps"] == rows["oversample-hard"]["steps"] == 20
    assert rows["oversample-hard"]["fork"] == "hard"
    hard, rest = 0, 1  # target columns
    # Trained on: both moved away from the parent; oversampling the slice fixes it faster.
    assert rows["continue-20"]["loss"][rest] != rows["main"]["loss"][rest]
    assert rows["oversample-hard"]["loss"][hard] < rows["continue-20"]["loss"][hard]
    assert rows["oversample-hard"]["loss"][hard] < rows["main"]["loss"][hard]
    assert [r["model"] for r in seen["plain"]["rows"]] == ["main", "hard"]
    assert seen["compare"]["notes"] == []


def test_a_narrow_slice_is_warned_and_replay_keeps_the_other_classes(onthefly_home: Path) -> None:
    zeros = [i for i in range(len(TASK.train)) if int(TASK.train.tensors[1][i]) == 0][:200]
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        seen["alone"] = start_fork(client, "alone", indices=zeros, lr=3e-3)
        seen["replay"] = start_fork(client, "replay", indices=zeros, lr=3e-3, replay=0.5)
        seen["compare"] = reply(client.call("compare", forks=["alone", "replay"], baselines=False))

    native_run(onthefly_home, script, max_steps=PAUSE_AT + 1)
    alone, replay = seen["alone"], seen["replay"]
    assert len(alone["warnings"]) == 1
    assert "1 of the run's 3 classes (0)" in alone["warnings"][0]
    assert "replay=0.5" in alone["warnings"][0]
    assert replay["warnings"] == [] and replay["hparams"]["replay"] == 0.5
    assert replay["steps"] == alone["steps"] == 20
    rows = {r["model"]: r for r in seen["compare"]["rows"]}
    val = [t["name"] for t in seen["compare"]["targets"]].index("val")
    # Alone, the specialist drifts to class 0 everywhere (measured: validation accuracy
    # 0.835 -> 0.50); with replay it keeps most of the others (0.73).
    assert rows["replay"]["accuracy"][val] > rows["alone"]["accuracy"][val] + 0.15
