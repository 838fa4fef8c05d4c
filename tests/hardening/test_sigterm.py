"""SIGTERM (``docker stop``, systemd, SLURM) ends a run as Ctrl+C does, under both drivers.

A real training process gets SIGTERM (to it alone, as ``docker stop`` sends it) while it
trains and while it is paused. Checked: it exits by SIGTERM (``-15``), its discovery file and
its temporary folder are gone, no thread of the session is left, and its clients are told.
When the script installed its own SIGTERM handler, that one runs instead, and the session
still closes as the run unwinds.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.callbacks.live import session_files, wait_for_session
from tests.hardening.process import Run, training
from tests.hardening.wire import Wire

DRIVERS = {"native": (), "lightning": ("--lightning",)}


def _started(run: Run, home: Path, pause: bool) -> Wire:
    client = Wire(wait_for_session(home))
    client.call("subscribe", since=0)
    client.wait(
        lambda: any(e["type"] == "metrics" and e["step"] >= 3 for e in client.stream()) or None
    )
    if pause:
        assert client.call("pause")["type"] == "reply"
    assert run.workdirs()  # the session's folder exists while it runs
    return client


@pytest.mark.parametrize("moment", ["training", "paused"])
@pytest.mark.parametrize("driver", DRIVERS)
def test_sigterm_ends_the_run_cleanly_and_by_the_signal(
    driver: str, moment: str, onthefly_home: Path, tmp_path: Path
) -> None:
    with training(tmp_path, "--step-sleep", "0.005", *DRIVERS[driver]) as run:
        client = _started(run, onthefly_home, pause=moment == "paused")
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait(timeout=60) == -signal.SIGTERM, run.stderr()
        client.wait(lambda: client.close_code, timeout=30)
        client.close()
    assert "Terminated: received signal 15 (SIGTERM)" in run.stderr()
    assert "Exception in thread" not in run.stderr()
    assert run.threads_left() == []
    assert run.workdirs() == []
    assert session_files(onthefly_home) == []
    assert run.losses()  # the script's own clean-up ran too


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_sigterm_handler_of_the_script_is_left_in_place(
    driver: str, onthefly_home: Path, tmp_path: Path
) -> None:
    with training(tmp_path, "--step-sleep", "0.005", "--own-sigterm", "3", *DRIVERS[driver]) as run:
        client = _started(run, onthefly_home, pause=False)
        os.kill(run.pid, signal.SIGTERM)
        assert run.wait(timeout=60) == 3, run.stderr()
        client.close()
    assert (tmp_path / "sigterm.txt").read_text() == "handled by the script"
    assert run.workdirs() == []  # its sys.exit unwound the run: the session closed
    assert session_files(onthefly_home) == []
