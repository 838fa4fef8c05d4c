"""Forks, comparisons and merges in a 2-rank ``onthefly.Trainer`` run (gloo, CPU), end to end.

One run (module fixture), with a collective timeout of 3 s, goes through: pause, a selection,
a fork that trains for longer than the timeout while rank 1 holds, a fork cancelled midway,
a comparison, a soup merge that resets the optimizer, its discard, a second merge, resume and
stop. Exports (rank 0's model) and Distribution Health (every rank against rank 0) show
what each rank holds after each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from onthefly.sessions.resume import read
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.distributed.ranks import Ranks, launched

SCRIPT = "tests.distributed.run_forks"
TIMEOUT_S = 3
FORK_STEPS = 100  # 4 samples of 10 ms each per step: about 4 s, longer than the timeout


@dataclass
class Story:
    home: Path
    folder: Path
    ranks: Ranks
    client: LiveClient
    replies: dict[str, dict[str, Any]]
    held: dict[str, Any]
    codes: list[int]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("run")
    env = {"ONTHEFLY_DIST_TIMEOUT": str(TIMEOUT_S)}
    replies: dict[str, dict[str, Any]] = {}
    held: dict[str, Any] = {}
    with launched(SCRIPT, ["--out", str(folder)], home, folder, env=env) as ranks:
        client = LiveClient(wait_for_session(home))
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 12)

        def export(name: str) -> None:
            replies[f"export-{name}"] = client.call("export", path=str(folder / f"{name}.otf"))

        def health(name: str) -> None:
            replies[f"health-{name}"] = client.call("health", check="distribution")

        replies["pause"] = client.call("pause")
        replies["select"] = client.call("select", split="train", top=16, name="tail")
        health("paused")
        export("before")
        (folder / "slow").touch()
        replies["fork"] = client.call("fork", name="tail-fix", selection="tail", steps=FORK_STEPS)
        long_fork = client.send("fork", name="long", selection="tail", steps=100_000)
        client.wait_event(lambda e: e["type"] == "fork_progress" and e["fork"] == "long")
        replies["cancel"] = client.call("cancel")
        replies["long"] = client.wait(lambda: client.answers.get(long_fork))
        (folder / "slow").unlink()
        held["alive"] = [p.poll() for p in ranks.processes]
        held["last_steps"] = [ranks.steps(rank)[-1]["step"] for rank in (0, 1)]
        health("forked")
        replies["compare"] = client.call("compare", forks=["tail-fix"])
        replies["merge"] = client.call(
            "merge", method="soup", forks=["tail-fix"], optimizer="reset", force=True
        )
        health("merged")
        export("merged")
        replies["discard"] = client.call("discard_merge")
        health("discarded")
        export("discarded")
        replies["merge-again"] = client.call("merge", method="soup", forks=["tail-fix"], force=True)
        health("merged-again")
        replies["resume"] = client.call("resume")
        paused = replies["pause"]["data"]["step"]
        client.wait(lambda: len(ranks.steps(1)) >= paused + 6 or None)  # forks publish steps too
        replies["stop"] = client.call("stop")
        codes = ranks.wait()
        client.close()
        return Story(home, folder, ranks, client, replies, held, codes)


def _data(story: Story, name: str) -> dict[str, Any]:
    reply = story.replies[name]
    assert reply["type"] == "reply", reply
    return dict(reply["data"])


def _problems(story: Story, name: str) -> list[str]:
    return [f["summary"] for f in _data(story, name)["findings"] if f["severity"] != "info"]


def _identical(story: Story, name: str) -> str:
    summaries = [f["summary"] for f in _data(story, name)["findings"]]
    return next(s for s in summaries if s.startswith("all 2 ranks hold identical"))


def _cursor(story: Story, name: str, rank: int) -> dict[str, Any]:
    findings = _data(story, name)["findings"]
    return dict(next(f["details"] for f in findings if f["summary"].startswith(f"rank {rank}:")))


def _model(story: Story, name: str) -> dict[str, torch.Tensor]:
    return dict(read(story.folder / f"{name}.otf").model)


def _momentum(story: Story, name: str) -> list[torch.Tensor]:
    state = read(story.folder / f"{name}.otf").rest["optimizer"]["state"]
    return [state[k]["momentum_buffer"] for k in sorted(state)]


def test_a_fork_longer_than_the_timeout_trains_on_rank_0_while_rank_1_holds(story: Story) -> None:
    paused = _data(story, "pause")["step"]
    fork = _data(story, "fork")
    assert fork["status"] == "done" and fork["steps"] == FORK_STEPS and fork["has_weights"]
    assert fork["parent_step"] == paused
    assert fork["duration"] > TIMEOUT_S  # every held collective stayed far shorter
    assert fork["slice_loss"] < fork["parent_slice_loss"]
    assert story.held["alive"] == [None, None]
    # Neither rank trained meanwhile (each records the step before the one it holds at).
    assert story.held["last_steps"] == [paused - 1, paused - 1]
    # DDP copies rank 0's buffers to the others at the start of each forward, so at a pause
    # each rank holds BatchNorm statistics updated by its own last batch (a note, not a
    # problem): the fork changed nothing on either rank.
    assert _problems(story, "health-paused") == _problems(story, "health-forked") == []
    for name in ("health-paused", "health-forked"):
        notes = [f for f in _data(story, name)["findings"] if "BatchNorm" in f["summary"]]
        assert [f["details"]["tensors"] for f in notes] == [["1.running_mean", "1.running_var"]]
    for rank in (0, 1):
        cursor = _cursor(story, "health-forked", rank)
        assert cursor["step"] == paused
        assert cursor["last_collective_ago_s"] < TIMEOUT_S


def test_cancel_stops_a_fork_midway(story: Story) -> None:
    assert _data(story, "cancel") == {"cancelled": True, "fork": "long"}
    long = _data(story, "long")
    assert long["status"] == "cancelled" and not long["has_weights"]
    assert long["steps"] < 100_000


def test_compare_evaluates_on_rank_0(story: Story) -> None:
    compare = _data(story, "compare")
    models = [r["model"] for r in compare["rows"]][1:]
    assert models == ["tail-fix", f"continue-{FORK_STEPS}", "oversample-tail-fix"]
    targets = {t["name"]: t["samples"] for t in compare["targets"]}
    assert targets == {"tail-fix": 16, "rest": 48, "val": 16}  # the whole dataset's indices
    slice_losses = [r["loss"][0] for r in compare["rows"]]
    assert slice_losses[1] < slice_losses[0]


def test_a_merge_reaches_every_rank_and_its_discard_too(story: Story) -> None:
    merge = _data(story, "merge")
    assert merge["method"] == "soup" and merge["optimizer"] == "reset"
    before, merged, discarded = (_model(story, name) for name in ("before", "merged", "discarded"))
    # Rank 0's weights and BatchNorm statistics changed, and rank 1 holds the same.
    changed = [k for k in before if not torch.equal(before[k], merged[k])]
    assert {"0.weight", "1.running_mean", "3.weight"} <= set(changed)
    assert _problems(story, "health-merged") == []
    assert _identical(story, "health-merged") == (
        "all 2 ranks hold identical parameters (6), buffers (3) and optimizer state (1 entry)"
    )
    # Discarded: rank 0 is back to the pre-merge model and momenta, bit for bit, and rank 1,
    # whose optimizer state the reset had emptied, holds them again too.
    assert all(torch.equal(before[k], discarded[k]) for k in before)
    for old, back in zip(_momentum(story, "before"), _momentum(story, "discarded"), strict=True):
        assert torch.equal(old, back)
    assert _problems(story, "health-discarded") == []
    assert _identical(story, "health-discarded") == (
        "all 2 ranks hold identical parameters (6), buffers (3) and optimizer state (7 entries)"
    )
    assert _data(story, "discard")["name"] == merge["name"]
    assert _data(story, "merge-again")["optimizer"] == "keep"
    assert _problems(story, "health-merged-again") == []


def test_both_ranks_train_on_together_after_the_merge(story: Story) -> None:
    assert story.codes == [0, 0], [story.ranks.err(r) for r in (0, 1)]
    paused, stopped = _data(story, "pause")["step"], _data(story, "stop")["step"]
    assert stopped >= paused + 6
    steps = [[s["step"] for s in story.ranks.steps(rank)] for rank in (0, 1)]
    assert steps[0] == steps[1] == list(range(1, stopped + 1))
    for rank in (0, 1):
        assert f"FIT RETURNED {stopped} ON RANK {rank}" in story.ranks.out(rank)
        assert "Traceback" not in story.ranks.err(rank)
    assert session_files(story.home) == []
