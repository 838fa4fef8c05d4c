"""Exported sessions in the hub's folder: found, listed, loaded on first use, read-only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from websockets.sync.client import connect

from onthefly.hub import Hub
from onthefly.hub.files import scan_folder
from tests.hub.client import listing
from tests.sessions.training import Losses, native_run


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    (folder / "nested").mkdir()
    native_run(6, losses=Losses(export_at=6, path=folder / "nested" / "a.otf"))
    (folder / "not-a-session.otf").write_bytes(b"nothing here")
    return folder


def test_files_are_listed_then_served_read_only(exported: Path) -> None:
    with Hub(port=0, logdir=exported, quiet=True) as hub:
        (entry,) = listing(hub)["sessions"]
        assert (entry["kind"], entry["file"], entry["live"]) == ("file", "nested/a.otf", False)
        assert entry["project"] == "resume"
        url = f"ws://127.0.0.1:{hub.port}{entry['path']}?token={hub.token}"
        with connect(url, open_timeout=10) as socket:
            socket.recv(timeout=10)
            socket.send(json.dumps({"type": "subscribe", "id": "s"}))
            snapshot = next(
                frame
                for frame in (json.loads(socket.recv(timeout=10)) for _ in range(3))
                if frame["type"] == "snapshot"
            )
            (run,) = snapshot["runs"]
            assert run["state"] == "finished" and run["series"]["loss"]["steps"] == list(
                range(1, 7)
            )
            socket.send(json.dumps({"type": "resume", "id": "r"}))
            error = json.loads(socket.recv(timeout=10))
            assert error["error"]["code"] == "unsupported" and "a.otf" in error["error"]["message"]


def test_an_unchanged_file_keeps_its_entry_and_a_removed_one_goes(
    exported: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(exported, folder)
    first = scan_folder(folder, {})
    assert list(first) == ["nested/a.otf"]
    assert scan_folder(folder, first)["nested/a.otf"] is first["nested/a.otf"]
    (folder / "nested" / "a.otf").unlink()
    assert scan_folder(folder, first) == {}
