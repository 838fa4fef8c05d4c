"""A 2-rank ``onthefly.Trainer`` run (gloo, CPU) steered by one real client, end to end.

One run (module fixture) goes through: pause, Distribution Health, ``set``, ``test``,
``export``, resume, a weight planted on rank 1, pause, Distribution Health, stop while
paused. The tests read what the client saw and what each rank recorded; a second run
resumes from the export.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from onthefly.server.discovery import list_sessions
from onthefly.sessions.resume import read
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.distributed.ranks import Ranks, launched

SCRIPT = "tests.distributed.run_native"


@dataclass
class Story:
    home: Path
    ranks: Ranks
    client: LiveClient
    sessions: list[Any]
    replies: dict[str, dict[str, Any]]
    at_pause: list[int]
    codes: list[int]
    export: Path


def _train_step(client: LiveClient, at_least: int) -> None:
    client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= at_least)


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Story:
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("run")
    args = ["--out", str(folder), "--step-sleep", "0.03"]
    replies: dict[str, dict[str, Any]] = {}
    with launched(SCRIPT, args, home, folder) as ranks:
        client = LiveClient(wait_for_session(home))
        _train_step(client, 3)
        sessions = list_sessions(home)
        replies["pause"] = client.call("pause")
        time.sleep(0.5)  # many steps' worth: none may happen while paused
        at_pause = [ranks.steps(rank)[-1]["step"] for rank in (0, 1)]
        replies["health"] = client.call("health", check="distribution")
        replies["histogram"] = client.call("histogram", split="train", source="training")
        replies["set"] = client.call("set", lr=0.05)
        replies["test"] = client.call("test")
        replies["export"] = client.call("export", path=str(folder / "run.otf"))
        replies["import"] = client.call("import", path=str(folder / "run.otf"))
        replies["resume"] = client.call("resume")
        paused_at = replies["pause"]["data"]["step"]
        _train_step(client, paused_at + 8)
        (folder / "diverge").touch()
        _train_step(client, paused_at + 10)
        replies["pause2"] = client.call("pause")
        replies["health2"] = client.call("health", check="distribution")
        replies["stop"] = client.call("stop")
        codes = ranks.wait()
        client.wait_event(lambda e: e["type"] == "status" and e["state"] == "finished")
        client.close()
        return Story(home, ranks, client, sessions, replies, at_pause, codes, folder / "run.otf")


def _data(story: Story, name: str) -> dict[str, Any]:
    reply = story.replies[name]
    assert reply["type"] == "reply", reply
    return dict(reply["data"])


def test_one_client_sees_one_run(story: Story) -> None:
    assert [s.pid for s in story.sessions] == [story.ranks.processes[0].pid]
    assert len({e["run"] for e in story.client.events}) == 1
    assert len(story.client.of("run_started")) == 1


def test_pause_lands_on_both_ranks_at_the_same_step(story: Story) -> None:
    paused = _data(story, "pause")["step"]
    # The script's callback comes after OnTheFly's: held at the end of step `paused`, each
    # rank has recorded the step before.
    assert story.at_pause == [paused - 1, paused - 1]
    for rank in (0, 1):
        steps = [s["step"] for s in story.ranks.steps(rank)]
        assert steps == list(range(1, len(steps) + 1))  # every step once, none skipped


def test_set_and_test_take_effect_on_every_rank_at_the_pause(story: Story) -> None:
    paused = _data(story, "pause")["step"]
    assert _data(story, "set")["changes"][0]["new"] == 0.05
    for rank in (0, 1):
        lrs = {s["step"]: s["lr"] for s in story.ranks.steps(rank)}
        assert {lrs[s] for s in lrs if s < paused} == {0.1}
        assert {lrs[s] for s in lrs if s > paused} == {0.05}
    tests = [_lines(story.ranks.folder / f"tests.{rank}.jsonl") for rank in (0, 1)]
    assert [t["step"] for t in tests[0]] == [t["step"] for t in tests[1]] == [paused]
    test = _data(story, "test")
    # The reply's loss is the mean over both ranks' test samples (the same 16 on each here).
    assert test["loss"] == pytest.approx(tests[0][0]["loss"], rel=1e-6)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_distribution_health_agrees_then_names_the_planted_weight(story: Story) -> None:
    healthy = _data(story, "health")["findings"]
    assert [f["severity"] for f in healthy if f["severity"] != "info"] == []
    summaries = [f["summary"] for f in healthy]
    assert any(s.startswith("2 ranks over gloo") for s in summaries)
    paused = _data(story, "pause")["step"]
    for rank in (0, 1):
        cursor = next(f["details"] for f in healthy if f["summary"].startswith(f"rank {rank}:"))
        assert cursor["step"] == paused and cursor["rank"] == rank
        assert cursor["sampler_epoch"] == cursor["epoch"]
    assert any("identical parameters (4), buffers (0)" in s for s in summaries)

    errors = [f for f in _data(story, "health2")["findings"] if f["severity"] == "error"]
    named = [(f["details"]["rank"], f["details"]["kind"], f["details"]["tensors"]) for f in errors]
    assert named == [(1, "parameter", ["0.weight"])]
    assert errors[0]["summary"] == "rank 1 differs in 1 parameter tensor: 0.weight"


def test_rank_0_holds_every_ranks_per_sample_losses_at_the_pause(story: Story) -> None:
    paused = _data(story, "pause")["step"]
    # 4 samples per batch on each of the 2 ranks, 64 distinct samples in all.
    assert _data(story, "histogram")["total"] == min(64, 2 * 4 * paused)


def test_loading_into_a_distributed_run_is_refused(story: Story) -> None:
    error = story.replies["import"]
    assert error["type"] == "error" and error["error"]["code"] == "unsupported"
    assert "distributed run" in error["error"]["message"]


def test_stop_while_paused_ends_both_ranks_cleanly(story: Story) -> None:
    assert story.codes == [0, 0], [story.ranks.err(r) for r in (0, 1)]
    stopped = _data(story, "stop")["step"]
    assert stopped == _data(story, "pause2")["step"]
    for rank in (0, 1):
        assert f"FIT RETURNED {stopped} ON RANK {rank}" in story.ranks.out(rank)
        assert "GROUP AT EXIT: False" in story.ranks.out(rank)  # the trainer's group destroyed
        assert "Traceback" not in story.ranks.err(rank)
    assert session_files(story.home) == []


def test_export_resumes_both_ranks_bit_identically(
    story: Story, tmp_path: Path, onthefly_home: Path
) -> None:
    exported = _data(story, "export")
    saved = read(story.export)
    assert saved.manifest.world_size == 2 and len(saved.rng) == 2 and len(saved.rank_positions) == 2
    paused = exported["step"]
    until = paused + 6
    args = ["--out", str(tmp_path), "--resume-from", str(story.export), "--max-steps", str(until)]
    with launched(SCRIPT, [*args, "--do-test-after"], onthefly_home, tmp_path) as ranks:
        assert ranks.wait() == [0, 0], [ranks.err(r) for r in (0, 1)]
    for rank in (0, 1):
        original = [s for s in story.ranks.steps(rank) if paused < s["step"] <= until]
        resumed = ranks.steps(rank)
        keys = ("step", "epoch", "batch", "sampler_epoch", "lr", "loss")
        assert [{k: s[k] for k in keys} for s in resumed] == [
            {k: s[k] for k in keys} for s in original
        ]
        # do_test_after: every rank evaluates at the last step.
        assert [t["step"] for t in _lines(tmp_path / f"tests.{rank}.jsonl")] == [until]
