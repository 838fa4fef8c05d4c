"""The per-sample CLI subcommands against a real paused training run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from onthefly import cli
from onthefly.cli import samples as _cli_samples
from tests.callbacks.live import LiveClient
from tests.callbacks.sample_runs import N
from tests.callbacks.test_sample_tracker import run_live


def test_scan_hist_select_and_samples(
    onthefly_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs: dict[str, str] = {}

    def script(client: LiveClient) -> None:
        for name, argv in {
            "scan": ["scan", "--split", "val"],
            "hist": ["hist", "--split", "val", "--bins", "4"],
            "hist_json": ["hist", "--split", "val", "--bins", "4", "--json"],
            "select": ["select", "--split", "val", "--quantile", "0.9", "--name", "tail"],
            "samples": ["samples", "--split", "val", "--top", "3"],
            "out": [
                "samples",
                "--split",
                "val",
                "--top",
                "5",
                "--out",
                str(tmp_path / "hard.parquet"),
            ],
            "bad": ["samples", "--split", "val", "--out", str(tmp_path / "hard.xlsx")],
            "missing": ["hist", "--split", "test"],
        }.items():
            code = cli.main(argv)
            captured = capsys.readouterr()
            outputs[name] = f"{code}\n{captured.out}{captured.err}"

    run_live(script, onthefly_home)
    assert outputs["scan"].startswith("0\n") and f"{N} samples" in outputs["scan"]
    assert outputs["hist"].count("#") > 0 and "val losses (scan" in outputs["hist"]
    assert sum(json.loads(outputs["hist_json"].split("\n", 1)[1])["counts"]) == N
    assert "selection 'tail': 6 val samples" in outputs["select"]
    rows = outputs["samples"].splitlines()
    assert rows[1] == "top-3: 3 samples" and rows[3].split()[0] == "59"
    assert "wrote 5 samples" in outputs["out"]
    assert pq.read_table(tmp_path / "hard.parquet").num_rows == 5
    assert (
        outputs["bad"].startswith("2\n") and "expected a .parquet, .csv or .json" in outputs["bad"]
    )
    assert outputs["missing"].startswith("1\n") and "never scanned" in outputs["missing"]


def test_select_by_data_map_region_and_box(
    onthefly_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs: dict[str, tuple[int, str]] = {}

    def script(client: LiveClient) -> None:
        for name, argv in {
            "mislabeled": ["select", "--region", "mislabeled", "--size", "5", "--json"],
            "estimated": ["select", "--region", "mislabeled", "--json"],
            "box": ["select", "--box", ":0.5,0:", "--json"],
            "stray": ["select", "--top", "3", "--size", "2"],
        }.items():
            code = cli.main(argv)
            captured = capsys.readouterr()
            outputs[name] = (code, captured.out + captured.err)

    run_live(script, onthefly_home)
    code, text = outputs["mislabeled"]
    mislabeled = json.loads(text)
    assert code == 0 and mislabeled["size"] == 5
    assert mislabeled["criterion"] == {
        "kind": "region",
        "region": "mislabeled",
        "fraction": None,
        "size": 5,
        "with_correctness": False,
    }
    # i**2 losses: from i = 28 on, exp(-loss) is 0 in float64: the least confident, tied.
    assert all(r["index"] >= 28 and r["confidence"] == 0 for r in mislabeled["preview"])
    assert json.loads(outputs["estimated"][1])["size"] >= 1
    box = json.loads(outputs["box"][1])
    assert box["criterion"]["kind"] == "box" and box["criterion"]["confidence_max"] == 0.5
    assert all(row["confidence"] <= 0.5 for row in box["preview"])
    assert outputs["stray"][0] == 2 and "go with --region" in outputs["stray"][1]


def test_a_box_takes_two_ranges_and_one_criterion(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli_samples.box("0:0.3,:0.1") == {
        "confidence_min": 0.0,
        "confidence_max": 0.3,
        "variability_min": None,
        "variability_max": 0.1,
    }
    assert _cli_samples.box(":0.3")["confidence_max"] == 0.3  # confidence only
    for argv in (
        ["select", "--box", "0.5"],
        ["select", "--box", ":,:"],
        ["select", "--box", "a:b,c:d"],
        ["select", "--top", "3", "--box", "0:1"],
    ):
        with pytest.raises(SystemExit) as exited:
            cli.main(argv)
        assert exited.value.code == 2
    assert "expected C0:C1,V0:V1" in capsys.readouterr().err
