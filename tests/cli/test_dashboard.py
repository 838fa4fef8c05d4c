"""``onthefly dashboard``: the hub as a command, until Ctrl+C."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from onthefly.hub.address import read_hub, running_hub


def hub_process(*extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "onthefly", "dashboard", "--port", "0", *extra],
        stdout=subprocess.PIPE,
        text=True,
        # The test sends Ctrl+C: the child must not inherit an ignored SIGINT (nohup).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def test_the_hub_prints_its_address_and_stops_on_ctrl_c(onthefly_home: Path) -> None:
    with hub_process("--logdir", ".") as process:
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith("[onthefly] dashboard: http://127.0.0.1:")
            assert "exported sessions in" in process.stdout.readline()
            hub = running_hub(onthefly_home)
            assert hub is not None and hub.url in first
            process.send_signal(signal.SIGINT)
            assert process.wait(timeout=30) == 130
            stopped = read_hub(onthefly_home)
            assert stopped is not None and stopped.pid == 0 and stopped.token == hub.token
        finally:
            process.kill()


def test_a_second_hub_of_the_same_home_is_refused(onthefly_home: Path) -> None:
    with hub_process() as first:
        try:
            assert first.stdout is not None and first.stdout.readline()
            second = subprocess.run(
                [sys.executable, "-m", "onthefly", "dashboard", "--port", "0"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert second.returncode == 2
            assert "a hub already serves this machine's runs at http://" in second.stderr
        finally:
            first.kill()
