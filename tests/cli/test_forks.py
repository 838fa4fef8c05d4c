"""The fork CLI subcommands against a real paused training run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from onthefly import cli
from tests.callbacks.live import LiveClient
from tests.forks import synthetic
from tests.forks.live import PAUSE_AT, native_run


def test_fork_compare_merge_discard_and_lineage(
    onthefly_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hard = ",".join(str(i) for i in synthetic.make_task().hard_train_idx)
    outputs: dict[str, str] = {}

    def script(client: LiveClient, trainer: Any) -> None:
        for name, argv in {
            "fork": ["fork", "--indices", hard, "--steps", "20", "--lr", "1e-3", "--name", "hard"],
            "taken": ["fork", "--indices", "1,2", "--steps", "1", "--name", "hard"],
            "forks": ["forks"],
            "compare": ["compare"],
            "compare_run": ["compare", "main", "hard"],
            "soup": ["merge", "--method", "soup", "--from", "hard", "--force"],
            "discard": ["discard-merge"],
            "greedy": ["merge", "main", "--method", "greedy", "--from", "hard", "--json"],
            "lineage": ["lineage"],
        }.items():
            code = cli.main(argv)
            captured = capsys.readouterr()
            outputs[name] = f"{code}\n{captured.out}{captured.err}"

    native_run(onthefly_home, script)
    fork = outputs["fork"]
    assert fork.startswith("0\nfork 'hard' done: 20 steps in ")
    # Numbers are read back, never compared as text: another CPU prints another last digit.
    found = re.search(
        rf"on 200 samples from step {PAUSE_AT}; slice loss (\S+) -> (\S+) \(run hard\)", fork
    )
    assert found is not None, fork
    before, after = found.groups()
    assert float(before) == pytest.approx(2.217, abs=0.01)
    assert float(after) == pytest.approx(1.324, abs=0.01)
    assert outputs["taken"].startswith("1\nonthefly: fork 'hard': the name 'hard' is taken")
    forks = outputs["forks"].splitlines()
    assert forks[1].split()[:4] == ["name", "status", "from", "step"]
    assert forks[2].split() == ["hard", "done", str(PAUSE_AT), "20", "200", before, after]
    table = outputs["compare"].splitlines()
    assert "hard (slice, 200)" in table[1] and "rest (rest, 1800)" in table[1]
    assert "val (val, 1000)" in table[1] and table[2].split()[:3] == ["|", "loss", "acc"]
    assert table[3].split()[0] == "main" and table[4].split()[:2] == ["hard", "|"]
    assert float(table[4].split()[2]) == pytest.approx(float(after), abs=2e-3)
    assert outputs["compare_run"] == outputs["compare"]  # the first name is the run
    soup = outputs["soup"].splitlines()
    assert soup[1] == (
        f"merge 'merge-1': soup of the model at step {PAUSE_AT} and hard; optimizer state kept "
        "(run merge-1)"
    )
    rows = {line.split()[0]: line.split() for line in soup[2:] if line.strip()}
    assert rows["before"][1] == "|" and rows["before"][3] == "0"
    assert float(rows["before"][2]) == pytest.approx(float(before), abs=2e-3)
    assert float(rows["after"][2]) < float(before)
    assert outputs["discard"] == f"0\ndiscarded merge 'merge-1': back to main at step {PAUSE_AT}\n"
    greedy = json.loads(outputs["greedy"].split("\n", 1)[1])
    assert greedy["method"] == "greedy" and greedy["kept"][0] in ("main", "hard")
    lineage = outputs["lineage"].splitlines()
    assert lineage[1] == "main (main, superseded)"
    assert lineage[2].startswith(f"├─ hard (fork at step {PAUSE_AT}, done: 20 steps on 200")
    assert lineage[3] == f"├─ merge-1 (soup merge at step {PAUSE_AT} with hard, discarded)"
    assert lineage[4] == f"└─ merge-2 (greedy merge at step {PAUSE_AT} with hard, active) *"


def test_a_fork_needs_one_slice_and_one_budget(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["fork", "--steps", "5"], ["fork", "--top", "5"], ["fork", "--top", "5"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 2
    assert "one of the arguments --steps --epochs is required" in capsys.readouterr().err


def test_a_refused_merge_says_so_with_its_reason_and_its_choice() -> None:
    from onthefly.cli.forks import render_fork, render_merge

    targets = [{"name": "val", "kind": "val", "samples": 10}]
    text = render_merge(
        {
            "name": "merge-1",
            "method": "soup",
            "step": 7,
            "forks": ["hard"],
            "kept": None,
            "applied": False,
            "reason": "the merged model's validation error rate 0.3 is above the parent's 0.2",
            "choice": {"weights": [0.25, 0.75]},
            "grid": [{}, {}, {}, {}],
            "optimizer": "keep",
            "targets": targets,
            "before": {"loss": [0.5], "accuracy": [0.8]},
            "after": {"loss": [0.6], "accuracy": [0.7]},
        }
    ).splitlines()
    assert text[0] == "merge 'merge-1': soup of the model at step 7 and hard: NOT APPLIED"
    assert text[1] == "chosen on validation: weights [0.25, 0.75] (best of 4)"
    assert text[2].startswith("the merged model's validation error rate")
    fork = render_fork(
        {
            "name": "narrow",
            "status": "done",
            "steps": 5,
            "duration": 0.5,
            "parent_step": 3,
            "selection": {"size": 30},
            "slice_loss": None,
            "parent_slice_loss": None,
            "run": "narrow",
            "warnings": ["the slice is narrow"],
        }
    )
    assert fork.splitlines()[1] == "warning: the slice is narrow"
