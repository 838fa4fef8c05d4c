"""The session-file subcommands of the CLI against a live native run."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from onthefly.cli import main
from tests.callbacks.test_checkpointer import live_run


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().out


def test_export_checkpoints_restore_import(
    onthefly_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with live_run(onthefly_home) as (client, _):
        run = client.session.run
        assert run_cli(capsys, "pause", run)[0] == 0
        code, out = run_cli(capsys, "export", run, str(tmp_path / "cli"), "--json")
        assert code == 0 and json.loads(out)["path"] == str(tmp_path / "cli.otf")
        code, out = run_cli(capsys, "export", run, str(tmp_path / "again"))
        assert re.fullmatch(
            rf"export: wrote {re.escape(str(tmp_path / 'again.otf'))} \(\d+\.\d (KiB|MiB)\) "
            r"at step \d+, epoch \d+\n",
            out,
        ), out
        code, out = run_cli(capsys, "snapshot", run, "--json")
        assert code == 0 and json.loads(out)["id"] == "c2"
        code, out = run_cli(capsys, "checkpoints", run, "--json")
        entries = json.loads(out)["checkpoints"]
        assert [e["reason"] for e in entries] == ["pause", "request"]
        # As text: a table, times as local date-times, sizes in units; no Python dict.
        code, out = run_cli(capsys, "checkpoints", run)
        lines = out.splitlines()
        assert lines[0].split() == ["ID", "STEP", "EPOCH", "REASON", "SAVED", "SIZE"]
        for line, entry in zip(lines[1:3], entries, strict=True):
            cells = line.split()
            assert cells[:4] == [
                entry["id"],
                str(entry["step"]),
                str(entry["epoch"]),
                entry["reason"],
            ]
            saved = datetime.strptime(" ".join(cells[4:6]), "%Y-%m-%d %H:%M:%S")
            assert abs(saved.timestamp() - entry["time"]) < 1
            assert cells[7] in ("B", "KiB", "MiB")
        assert "onthefly restore ID" in lines[3] and "{" not in out
        code, out = run_cli(capsys, "snapshot", run)
        assert re.fullmatch(
            r"snapshot: checkpoint c3 at step \d+, epoch \d+ \(\d+\.\d (KiB|MiB), "
            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\)\n",
            out,
        ), out
        assert run_cli(capsys, "restore", run, "c1")[0] == 0
        assert run_cli(capsys, "import", run, str(tmp_path / "cli.otf"))[0] == 0
        assert run_cli(capsys, "restore", run, "nope")[0] == 1
    code, out = run_cli(capsys, "inspect", str(tmp_path / "cli.otf"), "--verify")
    assert code == 0 and "checksums verified" in out


def test_inspect_of_a_bad_file_fails_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.otf").write_text("not a zip")
    assert main(["inspect", str(tmp_path / "x.otf")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("onthefly: ") and "corrupt or truncated" in err
