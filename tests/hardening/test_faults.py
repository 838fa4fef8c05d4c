"""Faults: killed clients, a killed training process, a full disk, Ctrl+C at awkward moments.

Covered elsewhere, not repeated here:

* ``kill -9`` in the middle of writing a session file leaves the earlier file intact:
  ``tests/sessions/test_writer.py::test_kill_9_during_an_export_leaves_the_earlier_file_intact``
  (the writer is killed half-way through a real file);
* a full disk at the writer level (``ENOSPC`` raised by a write):
  ``tests/sessions/test_writer.py::test_a_full_disk_leaves_the_earlier_file_intact``. Below,
  the same happens for real (a small tmpfs filled up) to an ``export`` command of a live run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

import onthefly
from onthefly.errors import CommandError, SessionGone, SessionNotFound
from onthefly.sessions.archive import SessionArchive
from tests.callbacks.live import session_files, wait_for_session
from tests.hardening.process import Run, training
from tests.hardening.thread_run import live_run
from tests.hardening.wire import Wire


def steps_seen(client: Wire) -> int:
    return max((e["step"] for e in client.stream() if e["type"] == "metrics"), default=0)


def onthefly_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onthefly", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


def test_killed_clients_then_a_killed_training_process(onthefly_home: Path, tmp_path: Path) -> None:
    with training(tmp_path, "--step-sleep", "0.005") as run:
        session = wait_for_session(onthefly_home)
        steady = Wire(session)
        steady.call("subscribe", since=0)

        # A dashboard-like client process, killed mid-stream: training goes on.
        watch = subprocess.Popen(
            [sys.executable, "-m", "onthefly", "watch", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=dict(os.environ),
        )
        assert watch.stdout is not None
        assert json.loads(watch.stdout.readline())["type"]  # it streams
        watch.kill()
        watch.wait(timeout=30)
        watch.stdout.close()
        killed_at = steps_seen(steady)
        steady.wait(lambda: steps_seen(steady) >= killed_at + 20 or None)
        assert steady.call("ping")["type"] == "reply"

        # The training process killed: its clients are told, its discovery file is ignored
        # and removed, even before its parent reaps it (a zombie serves nothing).
        client = onthefly.connect(home=onthefly_home)
        os.kill(run.pid, signal.SIGKILL)
        _until_dead(run)
        with pytest.raises(SessionGone):
            client.ping()
        client.close()
        steady.wait(lambda: steady.close_code, timeout=30)
        assert session_files(onthefly_home) == [f"{run.pid}-{session.port}.json"]
        listed = onthefly_cli("runs", "--json")
        assert (listed.returncode, json.loads(listed.stdout)) == (0, [])
        assert session_files(onthefly_home) == []
        with pytest.raises(SessionNotFound):
            onthefly.connect(home=onthefly_home)
        assert run.wait() == -signal.SIGKILL


def _until_dead(run: Run) -> None:
    """Wait for a killed process to stop running, without reaping it."""
    deadline = time.monotonic() + 30
    while psutil.Process(run.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)


@contextlib.contextmanager
def full_disk(folder: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted at ``folder`` (needs the right to mount, as root has)."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_fails_the_export_clearly_and_the_run_goes_on(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with (
        full_disk(tmp_path / "disk") as disk,
        live_run(onthefly_home, tmp_path) as session,
        onthefly.connect(session.run, home=onthefly_home) as client,
    ):
        first = client.export(disk / "run.otf")
        filler = disk / "filler"
        # Unbuffered: closing a buffered file would flush its rest and fail on the full disk.
        with filler.open("wb", buffering=0) as out, contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
        with pytest.raises(CommandError) as refused:
            client.export(disk / "run.otf", overwrite=True)
        assert refused.value.code == "file_error"
        assert "No space left on device" in str(refused.value)
        assert "untouched and the run goes on" in str(refused.value)
        with SessionArchive(disk / "run.otf") as earlier:  # the earlier export is intact
            assert earlier.manifest.step == first["step"]
        client.select(top=5, name="hard")
        with pytest.raises(CommandError) as selection:
            client.export_selection("hard", str(disk), format="csv")
        assert selection.value.code == "file_error"
        assert "No space left on device" in str(selection.value)
        assert sorted(p.name for p in disk.iterdir()) == ["filler", "run.otf"]
        step = client.status()["step"]
        deadline = time.monotonic() + 30
        while client.status()["step"] < step + 10:  # it trains on
            assert time.monotonic() < deadline
            time.sleep(0.02)
        filler.unlink()
        assert client.export(disk / "run.otf", overwrite=True)["step"] > first["step"]


@pytest.mark.parametrize("moment", ["paused", "testing", "scanning", "forking"])
def test_ctrl_c_exits_cleanly(onthefly_home: Path, tmp_path: Path, moment: str) -> None:
    workers = "1" if moment in ("scanning", "forking") else "0"
    with training(
        tmp_path, "--step-sleep", "0.005", "--slow-eval", "0.3", "--workers", workers
    ) as run:
        client = Wire(wait_for_session(onthefly_home))
        client.call("subscribe", since=0)
        client.wait(lambda: steps_seen(client) >= 3 or None)
        if moment == "paused":
            assert client.call("pause")["type"] == "reply"
        elif moment == "testing":
            client.send(json.dumps({"type": "test", "id": "t"}))
            client.wait_event(lambda e: e["type"] == "status" and e.get("state") == "testing")
        elif moment == "scanning":
            client.send(json.dumps({"type": "scan", "id": "s"}))
            # Once batches arrive: a Ctrl+C while torch starts worker processes is torch's.
            client.wait_event(
                lambda e: e["type"] == "scan_progress" and e["state"] == "running" and e["done"] > 0
            )
        else:  # a long fork training beside the paused run, with loader workers of its own
            assert client.call("pause")["type"] == "reply"
            fork = {"type": "fork", "id": "f", "indices": list(range(32)), "steps": 1_000_000}
            client.send(json.dumps(fork))
            # Once its workers run: a Ctrl+C while torch starts worker processes is torch's.
            client.wait_event(lambda e: e["type"] == "fork_progress" and e["step"] >= 3)
        assert run.workdirs()  # the session's folder exists while it runs
        children = run.descendants()
        assert len(children) >= int(workers)  # DataLoader workers (a scan or fork: its own)

        run.ctrl_c()
        # The documented behaviour: the script ends as Python scripts end on Ctrl+C.
        assert run.wait(timeout=60) == -signal.SIGINT, run.stderr()
        client.wait(lambda: client.close_code, timeout=30)
        client.close()
    assert "KeyboardInterrupt" in run.stderr()
    assert "Exception in thread" not in run.stderr()
    assert run.threads_left() == []
    assert psutil.wait_procs(children, timeout=30)[1] == []  # no orphan process
    assert run.workdirs() == []
    assert session_files(onthefly_home) == []
