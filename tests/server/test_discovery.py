"""Discovery files: permissions, atomic writes, listing and cleaning."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from onthefly.errors import ConfigurationError
from onthefly.server.discovery import (
    SessionFile,
    home_dir,
    list_sessions,
    remove_session,
    sessions_dir,
    write_session,
)


def _info(pid: int, port: int = 47621, started_at: float = 1.0) -> SessionFile:
    return SessionFile(
        pid=pid,
        port=port,
        token="secret",
        project="proj",
        run="main",
        started_at=started_at,
        session="abc",
        url=f"http://127.0.0.1:{port}/?token=secret",
    )


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(proc.stdout)


def test_home_comes_from_the_environment(onthefly_home: Path) -> None:
    assert home_dir() == onthefly_home
    assert sessions_dir() == onthefly_home / "sessions"
    assert home_dir("/elsewhere") == Path("/elsewhere")


def test_file_is_private_and_complete(tmp_path: Path) -> None:
    home = tmp_path / "home"
    path = write_session(_info(os.getpid()), home)
    assert path == home / "sessions" / f"{os.getpid()}-47621.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((home / "sessions").stat().st_mode) == 0o700
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    data = json.loads(path.read_text())
    assert {"pid", "port", "token", "project", "run", "started_at"} <= data.keys()
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_live_sessions_are_listed_oldest_first() -> None:
    write_session(_info(os.getpid(), 47622, started_at=2.0))
    write_session(_info(os.getpid(), 47621, started_at=1.0))
    assert [s.port for s in list_sessions()] == [47621, 47622]


def test_files_of_dead_processes_are_ignored_and_removed() -> None:
    stale = write_session(_info(_dead_pid()))
    live = write_session(_info(os.getpid(), 47699))
    assert [s.port for s in list_sessions()] == [47699]
    assert not stale.exists()
    assert live.exists()


def test_malformed_files_are_skipped_but_kept() -> None:
    folder = sessions_dir()
    folder.mkdir(parents=True)
    (folder / "junk.json").write_text("{not json")
    (folder / "partial.json").write_text(json.dumps({"pid": os.getpid()}))
    (folder / "typed.json").write_text(json.dumps({**_info(0).__dict__, "pid": "x"}))
    assert list_sessions() == []
    assert len(list(folder.iterdir())) == 3


def test_no_home_means_no_sessions(tmp_path: Path) -> None:
    assert list_sessions(tmp_path / "absent") == []


def test_remove_is_idempotent(tmp_path: Path) -> None:
    path = write_session(_info(os.getpid()), tmp_path)
    remove_session(path)
    remove_session(path)
    assert not path.exists()


def test_unwritable_home_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigurationError, match="cannot write the session file"):
        write_session(_info(os.getpid()), blocker)
