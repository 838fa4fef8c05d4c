"""scripts/foreground.py: Ctrl+C on a terminal reaches the command alone, not make."""

from __future__ import annotations

import os
import pty
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

FOREGROUND = Path(__file__).resolve().parents[2] / "scripts" / "foreground.py"

# The child restores Ctrl+C itself: the suite may run with SIGINT ignored (nohup).
CHILD = (
    "import signal, time; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "try:\n"
    "    print('ready', flush=True)\n"  # inside the try: the Ctrl+C may come at once
    "    time.sleep(60)\n"
    "except KeyboardInterrupt:\n"
    "    print('caught', flush=True)\n"
)


def _read_until(fd: int, text: bytes, timeout: float = 30) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while text not in seen:
        assert time.monotonic() < deadline, seen
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # the terminal closed: every process on it ended
            break
        if not chunk:
            break
        seen += chunk
    return seen


def _run_on_a_terminal(recipe: str, tmp_path: Path) -> tuple[int, str]:
    """Run ``make`` with a one-line recipe on a new pseudo-terminal, press Ctrl+C once the
    command printed ``ready``; return make's exit status and everything the terminal showed."""
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"run:\n\t{recipe}\n")
    pid, master = pty.fork()
    if pid == 0:  # the child: a new session whose controlling terminal is the pty
        os.execvp("make", ["make", "--no-print-directory", "-f", str(makefile), "run"])
    try:
        shown = _read_until(master, b"ready")
        os.write(master, b"\x03")  # Ctrl+C, as typed
        shown += _read_until(master, b"\x00")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_ctrl_c_ends_the_command_and_make_reports_no_interrupt(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    command = f"{sys.executable} {shlex.quote(str(child))}"
    code, shown = _run_on_a_terminal(f"{sys.executable} {FOREGROUND} {command}", tmp_path)
    assert "caught" in shown
    assert "Interrupt" not in shown and code == 0, shown


def test_without_a_terminal_it_runs_the_command_and_returns_its_status(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, str(FOREGROUND), sys.executable, "-c", "raise SystemExit(3)"],
        start_new_session=True,  # no controlling terminal
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 3
