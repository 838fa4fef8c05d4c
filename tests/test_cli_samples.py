"""The per-sample CLI subcommands against a real paused training run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from onthefly import cli
from tests.callbacks.live import LiveClient
from tests.callbacks.test_sample_tracker import N, run_live


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
