"""ForkSpawner in real runs: forks, comparisons, merges and the lineage over the wire
(adapter and Lightning forks, exports and the merge's defaults: ``test_fork_variants.py``).

Every test drives a real training run of the synthetic task (a known hard minority region)
through a real session server with a real websocket client, paused at a known step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from onthefly.protocol import SERVER_MESSAGE
from tests.callbacks.live import LiveClient
from tests.forks import synthetic
from tests.forks.live import (
    HARD,
    PAUSE_AT,
    TASK,
    assert_same,
    error,
    native_run,
    parent_state,
    reply,
    start_fork,
)

# ---------------------------------------------------------------------------- the parent


def test_a_fork_leaves_the_parent_untouched_and_training_bit_identical(
    onthefly_home: Path,
) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        model = trainer.model
        before = parent_state(trainer, model)
        counts = seen["tracker"].store.training.count.copy()
        seen["clone"] = start_fork(client, "clone", optimizer="clone", epochs=2)
        seen["fresh"] = start_fork(client, "fresh")
        seen["again"] = start_fork(client, "again")
        assert_same(before, parent_state(trainer, model), "parent")
        # The forks' batches never reach the parent's per-sample statistics.
        assert np.array_equal(seen["tracker"].store.training.count, counts)

    baseline = native_run(onthefly_home)
    forked = native_run(onthefly_home, _tracked(seen, script))
    assert len(forked.losses) == len(baseline.losses) == PAUSE_AT + 20
    assert forked.losses == baseline.losses  # bit for bit, before and after the forks
    fresh, again, clone = seen["fresh"], seen["again"], seen["clone"]
    assert fresh["status"] == "done" and fresh["steps"] == 20 and fresh["has_weights"]
    assert clone["steps"] == 2 * 4  # two epochs of 200 samples in batches of 64
    assert fresh["slice_loss"] < fresh["parent_slice_loss"]  # the specialist learned its slice
    assert fresh["slice_loss"] == again["slice_loss"]  # forks of one pause are independent


def _tracked(seen: dict[str, Any], script: Any) -> Any:
    def run(client: LiveClient, trainer: Any) -> None:
        from onthefly.callbacks.onthefly import OnTheFly

        umbrella = next(cb for cb in trainer.callbacks if isinstance(cb, OnTheFly))
        seen["tracker"] = umbrella.sample_tracker
        script(client, trainer)

    return run


# ---------------------------------------------------------------------------- end to end


def test_fork_compare_merge_discard_and_resume_from_the_merge(onthefly_home: Path) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        model, optimizer = trainer.model, trainer.optimizer
        hard = start_fork(client, "hard")
        table = reply(client.call("compare"))
        seen["compare"] = table
        before = parent_state(trainer, model)
        seen["held-out"] = synthetic.loss_on(model, TASK.val, TASK.hard_val_idx)
        for method, state in (("soup", "reset"), ("fisher", "keep")):
            merged = reply(
                client.call("merge", method=method, forks=["hard"], optimizer=state, force=True)
            )
            seen[method] = merged
            seen[f"held-out {method}"] = synthetic.loss_on(model, TASK.val, TASK.hard_val_idx)
            if state == "keep":  # the optimizer state goes on as it was …
                assert_same(before["optimizer"], optimizer.state_dict(), "kept optimizer")
            else:  # … or starts empty, the hyperparameters kept
                assert not optimizer.state_dict()["state"]
                assert optimizer.param_groups[0]["lr"] == synthetic.PARENT_LR
            undone = reply(client.call("discard_merge"))
            assert undone["name"] == merged["name"] and undone["active"] == "main"
            assert_same(before, parent_state(trainer, model), f"after discarding {method}")
        seen["kept"] = reply(
            client.call("merge", method="fisher", forks=["hard"], name="kept", force=True)
        )
        # Loaded in place: the run's optimizer still holds the model's own parameters.
        assert optimizer.param_groups[0]["params"][0] is next(model.parameters())
        seen["lineage"] = reply(client.call("lineage"))
        seen["hard"] = hard

    run = native_run(onthefly_home, script, max_steps=PAUSE_AT + 5)
    compare = seen["compare"]
    assert [t["name"] for t in compare["targets"]] == ["hard", "rest", "val"]
    assert [t["samples"] for t in compare["targets"]] == [200, 1800, 1000]
    parent_row, fork_row, *baselines = compare["rows"]
    assert (parent_row["kind"], fork_row["model"]) == ("main", "hard")
    assert [(b["model"], b["kind"]) for b in baselines] == [
        ("continue-20", "continue"),
        ("oversample-hard", "oversample"),
    ]
    assert fork_row["loss"][0] < parent_row["loss"][0]
    assert fork_row["loss"][0] == pytest.approx(seen["hard"]["slice_loss"], rel=1e-6)
    for method in ("soup", "fisher"):
        merged = seen[method]
        before, after = merged["before"], merged["after"]
        assert after["loss"][0] < before["loss"][0], method  # the hard slice improves …
        assert seen[f"held-out {method}"] < seen["held-out"], method  # … held-out ones too
        assert after["loss"][2] <= _tolerated(before["loss"][2]), method  # validation holds
    # Training went on from the merged weights: the loss of the first step after the merge
    # is the merged model's, not the parent's.
    assert run.losses[PAUSE_AT] != _baseline_losses(onthefly_home)[PAUSE_AT]
    lineage = seen["lineage"]
    nodes = {n["name"]: n for n in lineage["nodes"]}
    assert lineage["active"] == nodes["kept"]["run"]
    assert nodes["main"]["status"] == "superseded" and nodes["hard"]["status"] == "done"
    assert nodes["merge-1"]["status"] == nodes["merge-2"]["status"] == "discarded"
    assert nodes["kept"]["metrics_run"] == "main" and nodes["kept"]["from_step"] == PAUSE_AT
    edges = {(e["source"], e["target"], e["kind"], e["method"]) for e in lineage["edges"]}
    assert ("main", "hard", "fork", None) in edges
    assert {("main", "kept", "merge", "fisher"), ("hard", "kept", "merge", "fisher")} <= edges
    assert run.client is not None
    events = [e for e in run.client.events if e["type"] == "lineage"]
    assert events and events[-1]["active"] == nodes["kept"]["run"]
    for event in events:  # what the server sent validates against the protocol
        SERVER_MESSAGE.validate_python(event)


def _tolerated(parent_val: float) -> float:
    """The full validation loss a soup or Fisher merge of parent and hard-slice specialist
    may reach (measured here: soup 0.463 -> 0.511, Fisher 0.463 -> 0.498)."""
    return parent_val * 1.10 + 0.02


_BASELINE: dict[str, list[float]] = {}


def _baseline_losses(home: Path) -> list[float]:
    if "losses" not in _BASELINE:
        _BASELINE["losses"] = native_run(home, max_steps=PAUSE_AT + 5).losses
    return _BASELINE["losses"]


# ---------------------------------------------------------------------------- cancel, failure


def test_cancel_stops_a_fork_midway_and_the_parent_stays_as_it_was(onthefly_home: Path) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        before = parent_state(trainer, trainer.model)
        fork_id = client.send("fork", name="long", indices=HARD, steps=1_000_000)
        client.wait_event(lambda e: e["type"] == "fork_progress" and e["step"] > 0)
        waiting = client.send("forks")  # control commands wait for the fork …
        cancel = reply(client.call("cancel"))  # … except cancel
        seen["fork"] = reply(client.wait(lambda: client.answers.get(fork_id)))
        seen["waited"] = reply(client.wait(lambda: client.answers.get(waiting)))["forks"]
        seen["cancel"] = cancel
        seen["lineage"] = reply(client.call("lineage"))
        assert_same(before, parent_state(trainer, trainer.model), "parent")

    run = native_run(onthefly_home, script)
    fork, lineage = seen["fork"], seen["lineage"]
    assert seen["cancel"] == {"cancelled": True, "fork": "long"}
    assert [f["status"] for f in seen["waited"]] == ["cancelled"]  # answered after the fork
    assert fork["status"] == "cancelled" and 0 < fork["steps"] < 1_000_000
    assert not fork["has_weights"] and fork["slice_loss"] is None
    assert next(n for n in lineage["nodes"] if n["name"] == "long")["status"] == "cancelled"
    assert run.client is not None
    progress = run.client.of("fork_progress", run=fork["run"])
    assert progress[0]["state"] == "running" and progress[-1]["state"] == "cancelled"
    assert run.client.of("status", run=fork["run"])[-1]["reason"] == "cancelled"
    assert len(run.losses) == PAUSE_AT + 20  # the parent trained on to its end


def test_a_failing_fork_is_marked_failed_and_the_parent_goes_on(onthefly_home: Path) -> None:
    def step_fn(parent: torch.nn.Module) -> Any:
        def step(batch: Any, state: Any) -> dict[str, Any]:
            if state.model is not parent:
                raise RuntimeError("the fork's step broke")
            x, y = batch
            loss = state.loss_fn(state.model(x), y)
            state.optimizer.zero_grad()
            loss.backward()
            state.optimizer.step()
            return {"loss": loss}

        return step

    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        seen["fork"] = start_fork(client, "broken")
        seen["forks"] = reply(client.call("forks"))

    run = native_run(onthefly_home, script, step_fn=step_fn)
    fork = seen["fork"]
    assert fork["status"] == "failed" and fork["steps"] == 0 and not fork["has_weights"]
    assert fork["message"] == "RuntimeError: the fork's step broke"
    assert [f["status"] for f in seen["forks"]["forks"]] == ["failed"]
    assert len(run.losses) == PAUSE_AT + 20


def test_a_batch_norm_model_forks_on_a_slice_one_sample_past_its_batches(
    onthefly_home: Path,
) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        # 3 * 64 + 1 samples: cut as the batch size says, the last batch holds one sample.
        seen["fork"] = start_fork(client, "odd", indices=HARD[:193], epochs=1)
        seen["lone"] = start_fork(client, "lone", indices=HARD[:1], steps=1)

    run = native_run(onthefly_home, script)
    fork, lone = seen["fork"], seen["lone"]
    assert fork["status"] == "done", fork["message"]
    assert fork["steps"] == 3 and fork["hparams"]["batch_size"] == 64 and fork["has_weights"]
    assert lone["status"] == "failed" and lone["steps"] == 0
    assert lone["message"].startswith("ValueError: ")
    assert "the slice has 1 sample" in lone["message"]
    assert "expected a slice of at least 2 samples" in lone["message"]
    assert len(run.losses) == PAUSE_AT + 20


# ---------------------------------------------------------------------------- slices


def test_slices_come_from_selections_and_criteria(onthefly_home: Path) -> None:
    seen: dict[str, Any] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        chosen = reply(client.call("select", split="train", top=40, name="worst"))
        seen["ids"] = [row["index"] for row in chosen["preview"]]
        seen["named"] = reply(client.call("fork", selection="worst", steps=2, name="named"))
        seen["tail"] = reply(client.call("fork", quantile=0.9, source="training", epochs=1))
        # A scan of the training set ranks the samples by their dataset index.
        reply(client.call("scan", split="train"))
        reply(client.call("fork", top=3, source="scan", steps=1, name="scanned"))
        seen["forks"] = reply(client.call("forks"))["forks"]
        registry = trainer.callbacks[0].fork_spawner.registry
        seen["indices"] = registry.get("named").indices
        seen["scanned"] = registry.get("scanned").indices
        model = trainer.model
        with torch.no_grad():
            model.eval()
            x, y = TASK.train.tensors
            losses = torch.nn.functional.cross_entropy(model(x), y, reduction="none")
            model.train()
        seen["truth"] = losses.argsort(descending=True)[:3].tolist()

    native_run(onthefly_home, script)
    named, tail = seen["named"], seen["tail"]
    assert named["selection"] == {
        "name": "worst",
        "criterion": {"kind": "top", "k": 40},
        "size": 40,
    }
    assert named["hparams"]["lr"] == synthetic.PARENT_LR  # the run's learning rate
    assert seen["indices"][:20] == seen["ids"]  # the selection's samples, highest loss first
    assert tail["name"] == "fork-1" and tail["budget"] == {"epochs": 1}
    assert tail["selection"]["criterion"] == {"kind": "quantile", "q": 0.9}
    assert tail["steps"] == -(-tail["selection"]["size"] // 64)  # one pass in batches of 64
    assert [f["name"] for f in seen["forks"]] == ["named", "fork-1", "scanned"]
    assert seen["scanned"] == seen["truth"]


# ---------------------------------------------------------------------------- errors


def test_bad_requests_get_clear_errors(onthefly_home: Path) -> None:
    answers: dict[str, tuple[str, str]] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        def ask(label: str, kind: str, **fields: Any) -> None:
            answers[label] = error(client.call(kind, **fields))

        ask("range", "fork", indices=[0, 5000], steps=1)
        ask("unknown selection", "fork", selection="nope", steps=1)
        reply(client.call("scan", split="val"))
        reply(client.call("select", split="val", top=5, name="val-top"))
        ask("val selection", "fork", selection="val-top", steps=1)
        start_fork(client, "plain")
        ask("taken", "fork", name="plain", indices=[1], steps=1)
        ask("unknown fork", "merge", method="soup", forks=["nope"])
        ask("twice", "merge", method="soup", forks=["plain", "plain"])
        ask("adapter merge", "merge", method="adapter", forks=["plain"])
        ask("soup weights", "merge", method="soup", forks=["plain"], weights=[1.0])
        ask("nothing to discard", "discard_merge")
        ask("no fork to compare", "compare", forks=["nope"])

    native_run(onthefly_home, script)
    expected = {
        "range": ("unsupported", "indices [5000] are out of range; expected dataset indices in"),
        "unknown selection": ("unsupported", "no selection named 'nope'"),
        "val selection": ("unsupported", "holds val samples; a fork trains on the training set"),
        "taken": ("unsupported", "the name 'plain' is taken"),
        "unknown fork": ("unsupported", "no fork named 'nope'; expected one of: plain"),
        "twice": ("unsupported", "name a fork twice"),
        "adapter merge": ("unsupported", "takes forks made with adapter_rank"),
        "soup weights": ("unsupported", "got 1 weights for 2 models"),
        "nothing to discard": ("invalid_state", "no merge to discard"),
        "no fork to compare": ("unsupported", "no fork named 'nope'"),
    }
    for label, (code, text) in expected.items():
        assert answers[label][0] == code, (label, answers[label])
        assert text in answers[label][1], (label, answers[label])


def test_forks_and_merges_need_a_paused_run(onthefly_home: Path) -> None:
    answers: dict[str, tuple[str, str]] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        reply(client.call("resume"))
        answers["fork"] = error(client.call("fork", indices=[1], steps=1))
        answers["merge"] = error(client.call("merge", method="soup", forks=["a"]))
        answers["discard"] = error(client.call("discard_merge"))
        client.call("stop")

    native_run(onthefly_home, script, max_steps=10_000)
    for kind in ("fork", "merge", "discard"):
        code, message = answers[kind]
        assert code == "invalid_state" and "needs a paused run (it is running)" in message
