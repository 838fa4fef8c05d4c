"""The hardening training script as a real subprocess, always cleaned up.

The process runs in its own session (process group), as a terminal job would: a Ctrl+C is
``SIGINT`` to the whole group, and the clean-up kills the group, DataLoader workers and all.
Its temporary folder (``TMPDIR``) is a fresh folder of the test, so a test can tell that the
session's working folder was removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests import interruptible

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Run:
    """A started training process and the files it writes."""

    process: subprocess.Popen[bytes]
    folder: Path
    tmpdir: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait(self, timeout: float = 60) -> int:
        """The exit status; a process still running after ``timeout`` seconds first writes
        every thread's stack to its stderr (``faulthandler``), and the failure shows it."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGUSR1)
            time.sleep(2)
            raise AssertionError(
                f"still running after {timeout} s; its stderr:\n{self.stderr()}"
            ) from None

    def ctrl_c(self) -> None:
        """What a terminal's Ctrl+C does: SIGINT to the whole process group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def descendants(self) -> list[psutil.Process]:
        """The process's children and theirs, while it runs."""
        with contextlib.suppress(psutil.NoSuchProcess):
            return psutil.Process(self.pid).children(recursive=True)
        return []

    def stdout(self) -> str:
        return (self.folder / "stdout.txt").read_text()

    def stderr(self) -> str:
        return (self.folder / "stderr.txt").read_text()

    def losses(self) -> list[float]:
        values: list[float] = json.loads((self.folder / "losses.json").read_text())
        return values

    def threads_left(self) -> list[str]:
        names: list[str] = json.loads((self.folder / "threads.json").read_text())
        return names

    def workdirs(self) -> list[str]:
        """The session working folders left in the process's temporary folder."""
        return sorted(p.name for p in self.tmpdir.glob("onthefly-*"))


@contextmanager
def training(folder: Path, *args: str, cwd: Path | None = None) -> Iterator[Run]:
    """Start ``python -m tests.hardening.training --out folder *args``; kill it on the way out.

    Args:
        folder: where its output files go (a temporary folder ``tmp/`` is made inside).
        args: more arguments of the script.
        cwd: its working directory (relative export paths land there); default ``folder``.
    """
    tmpdir = folder / "tmp"
    tmpdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmpdir)}
    # Through tests.interruptible: the tests Ctrl+C it, also when the suite ignores SIGINT.
    command = interruptible.command("-m", "tests.hardening.training", "--out", str(folder), *args)
    with (folder / "stdout.txt").open("wb") as out, (folder / "stderr.txt").open("wb") as err:
        process = subprocess.Popen(
            command,
            cwd=cwd or folder,
            env=env,
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        run = Run(process, folder, tmpdir)
        try:
            yield run
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
