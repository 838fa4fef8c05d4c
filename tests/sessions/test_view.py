"""``onthefly view``: an exported session's history, served read-only."""

from __future__ import annotations

import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

import onthefly
from onthefly.errors import CommandError
from onthefly.protocol import Snapshot
from onthefly.sessions import view
from tests import interruptible
from tests.callbacks.live import wait_for_session
from tests.sessions.training import Losses, native_run


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("view") / "run.otf"
    native_run(9, losses=Losses(export_at=9, path=path))
    return path


def test_the_history_is_served_and_control_commands_are_refused(
    exported: Path, onthefly_home: Path
) -> None:
    with (
        closing(view.serve(exported, port=0, quiet=True)) as server,
        onthefly.connect(str(server.port), home=onthefly_home) as client,
    ):
        status = client.status()
        assert (status["state"], status["step"]) == ("finished", 9)
        series = client.history("loss")["series"]
        assert series["steps"] == list(range(1, 10))
        with pytest.raises(CommandError) as refused:
            client.pause()
        assert refused.value.code == "unsupported" and "read-only" in str(refused.value)
        snapshot = next(iter(client.watch()))
        assert isinstance(snapshot, Snapshot) and snapshot.runs[0].state == "finished"


def test_onthefly_view_runs_until_ctrl_c(exported: Path, onthefly_home: Path) -> None:
    with subprocess.Popen(
        interruptible.command("-m", "onthefly", "view", str(exported), "--port", "0"),
        cwd=interruptible.ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:  # the with closes the pipe, also after a failed check
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("[onthefly] dashboard: http://127.0.0.1:")
            session = wait_for_session(onthefly_home)
            assert session.project == "resume"
            process.send_signal(2)  # Ctrl+C
            assert process.wait(timeout=30) == 130
        finally:
            process.kill()


def test_inspect_reads_the_file_without_torch(exported: Path) -> None:
    code = (
        "import sys, json; from onthefly.cli import main; rc = main(['inspect', sys.argv[1], "
        "'--json']); assert 'torch' not in sys.modules, 'torch was imported'; sys.exit(rc)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(exported)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    import json

    data = json.loads(done.stdout)
    assert data["manifest"]["step"] == 9 and data["manifest"]["driver"] == "native"
    assert {"state/model.pt", "state/rng.pt", "history/history.json"} <= set(data["members"])
    text = subprocess.run(
        [sys.executable, "-m", "onthefly", "inspect", str(exported)],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "position   step 9, epoch 1, batch 3" in text
