"""The native examples run as shipped (shrunk by their own arguments)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str) -> str:
    env = {**os.environ, "ONTHEFLY_SESSION": "0", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_grad_accumulation_example_steps_once_per_four_micro_batches() -> None:
    out = run_example("grad_accumulation.py", "--epochs", "2", "--samples", "160")
    assert "micro-batches 20  optimizer steps 5 " in out


def test_native_quickstart_trains_and_tests() -> None:
    out = run_example("native_quickstart.py", "--epochs", "1")
    assert out.startswith("test loss ")
