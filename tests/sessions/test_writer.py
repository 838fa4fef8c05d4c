"""Writing session files: atomic, so an earlier file survives a crash, a kill or a full disk."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onthefly.errors import SessionFileError
from onthefly.sessions.archive import SessionArchive
from onthefly.sessions.writer import ArchiveWriter, export_path
from tests.sessions.test_archive import good_file

ROOT = Path(__file__).resolve().parents[2]


def test_kill_9_during_an_export_leaves_the_earlier_file_intact(tmp_path: Path) -> None:
    target = tmp_path / "run.otf"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.sessions.slow_export", str(target)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == b"writing\n"  # the second export is half-way
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        process.stdout.close()  # type: ignore[union-attr]
    with SessionArchive(target) as archive:
        assert archive.manifest.step == 1
        assert float(archive.load_torch("state/model.pt")["w"][0]) == 1.0


def test_a_full_disk_leaves_the_earlier_file_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = good_file(tmp_path / "a.otf")
    before = path.read_bytes()

    def no_space(self: Any, name: str, obj: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ArchiveWriter, "add_torch", no_space)
    with pytest.raises(SessionFileError, match=r"No space left on device.*untouched"):
        good_file(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.otf"]  # no temporary file left


def test_export_paths_are_checked(tmp_path: Path) -> None:
    assert export_path(tmp_path / "run") == tmp_path / "run.otf"
    assert export_path(tmp_path / "run.otf") == tmp_path / "run.otf"
    with pytest.raises(SessionFileError, match="does not exist"):
        export_path(tmp_path / "missing" / "run.otf")
    with pytest.raises(SessionFileError, match="control characters"):
        export_path(str(tmp_path / "a\nb.otf"))
    with pytest.raises(SessionFileError, match="empty"):
        export_path("  ")


def test_an_existing_file_is_refused_unless_overwrite(tmp_path: Path) -> None:
    taken = tmp_path / "run.otf"
    taken.write_text("earlier")
    with pytest.raises(SessionFileError, match=r"run\.otf exists; expected a new file name"):
        export_path(tmp_path / "run")
    assert export_path(tmp_path / "run", overwrite=True) == taken
    (tmp_path / "link.otf").symlink_to(tmp_path / "nowhere")  # a dangling link is there too
    with pytest.raises(SessionFileError, match="exists"):
        export_path(tmp_path / "link.otf")


def test_a_file_that_appears_while_writing_is_not_replaced(tmp_path: Path) -> None:
    from tests.sessions.test_archive import manifest

    target = tmp_path / "run.otf"
    with ArchiveWriter(target, overwrite=False) as writer:
        writer.add_json("history/history.json", {"runs": []})
        target.write_text("someone else's")
        with pytest.raises(SessionFileError, match="exists"):
            writer.commit(manifest())
    assert target.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.otf"]  # no temporary file left


def test_a_name_the_file_system_refuses_is_a_session_file_error(tmp_path: Path) -> None:
    with pytest.raises(SessionFileError, match="too long"):
        export_path(tmp_path / ("x" * 300))
