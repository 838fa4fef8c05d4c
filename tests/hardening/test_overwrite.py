"""No silent overwrite: exports refuse a file that exists unless asked, and every file-system
failure is a ``file_error`` that says why (a live run, its wire and the real CLI).

Checked for ``export`` and ``export_selection``: an existing file (a session file, a CSV)
is refused and left byte for byte as it was; ``overwrite`` (``--overwrite``) replaces it; a
file name the file system refuses (300 characters) and an unwritable folder answer
``file_error`` with the reason, never ``internal``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onthefly.protocol import FILE_EXISTS
from onthefly.sessions.archive import SessionArchive
from tests.hardening.process import ROOT
from tests.hardening.thread_run import live_run
from tests.hardening.wire import Wire


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onthefly", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def error(answer: dict[str, Any]) -> tuple[str, str]:
    assert answer["type"] == "error", answer
    return answer["error"]["code"], answer["error"]["message"]


def test_exports_refuse_an_existing_file_unless_asked(onthefly_home: Path, tmp_path: Path) -> None:
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        assert wire.call("pause")["type"] == "reply"
        assert wire.call("select", top=5, name="hard")["type"] == "reply"
        run_otf, hard_csv = tmp_path / "run.otf", tmp_path / "hard.csv"
        run_otf.write_bytes(b"an earlier file")
        hard_csv.write_text("an earlier export")

        code, message = error(wire.call("export", path=str(run_otf), timeout=30))
        assert (code, message) == ("file_error", f"{run_otf} {FILE_EXISTS}")
        code, message = error(
            wire.call(
                "export_selection", name="hard", directory=str(tmp_path), format="csv", timeout=30
            )
        )
        assert (code, message) == ("file_error", f"{hard_csv} {FILE_EXISTS}")
        assert run_otf.read_bytes() == b"an earlier file"
        assert hard_csv.read_text() == "an earlier export"

        replaced = wire.call("export", path=str(run_otf), overwrite=True, timeout=30)
        assert replaced["type"] == "reply", replaced
        rewritten = wire.call(
            "export_selection",
            name="hard",
            directory=str(tmp_path),
            format="csv",
            overwrite=True,
            timeout=30,
        )
        assert rewritten["type"] == "reply" and rewritten["data"]["rows"] == 5, rewritten
        with SessionArchive(run_otf) as archive:
            assert archive.manifest.step == replaced["data"]["step"]
        assert hard_csv.read_text().startswith('"index"')

        # The CLI: refused with the reason, then --overwrite.
        refused = cli("export", session.run, str(run_otf))
        assert refused.returncode != 0 and FILE_EXISTS in refused.stderr, refused.stderr
        assert cli("export", session.run, str(run_otf), "--overwrite").returncode == 0
        out = tmp_path / "top.parquet"
        assert cli("samples", session.run, "--top", "3", "--out", str(out)).returncode == 0
        again = cli("samples", session.run, "--top", "3", "--out", str(out))
        assert again.returncode != 0 and FILE_EXISTS in again.stderr, again.stderr
        args = ("samples", session.run, "--top", "3", "--out", str(out), "--overwrite")
        assert cli(*args).returncode == 0
        assert wire.call("resume")["type"] == "reply"
        wire.close()


def test_file_system_failures_answer_file_error_with_the_reason(
    onthefly_home: Path, tmp_path: Path
) -> None:
    long_name = "x" * 300
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        assert wire.call("pause")["type"] == "reply"
        assert wire.call("select", top=5, name="hard")["type"] == "reply"
        answers = {
            "export, a name too long": wire.call("export", path=str(tmp_path / long_name)),
            "export, a folder name too long": wire.call(
                "export", path=str(tmp_path / long_name / "run.otf")
            ),
            "selection, a name too long": wire.call(
                "export_selection", name="hard", directory=str(tmp_path), file="y" * 250
            ),
            "selection, a folder name too long": wire.call(
                "export_selection", name="hard", directory=str(tmp_path / long_name)
            ),
        }
        assert wire.call("resume")["type"] == "reply"
        wire.close()
    for case, answer in answers.items():
        code, message = error(answer)
        assert code == "file_error", (case, answer)
        assert "too long" in message or "does not exist" in message, (case, message)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_folder_is_a_file_error(onthefly_home: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        assert wire.call("pause")["type"] == "reply"
        assert wire.call("select", top=5, name="hard")["type"] == "reply"
        exported = wire.call("export", path=str(locked / "run.otf"))
        selected = wire.call("export_selection", name="hard", directory=str(locked))
        assert wire.call("resume")["type"] == "reply"
        wire.close()
    for answer in (exported, selected):
        code, message = error(answer)
        assert code == "file_error" and "Permission denied" in message, answer
