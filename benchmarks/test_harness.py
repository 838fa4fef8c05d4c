"""The benchmarks' own harness (benchmarks/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_TWO_BENCHMARKS = """
import time

import pytest


@pytest.mark.timeout(1)
def test_stopped(benchmark):
    benchmark.pedantic(lambda: time.sleep(3), rounds=2, iterations=1)


def test_measured(benchmark):
    benchmark.pedantic(lambda: None, rounds=2, iterations=1)
"""


def test_a_benchmark_stopped_by_its_timeout_leaves_the_others_in_the_report(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_two.py").write_text(_TWO_BENCHMARKS)
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "benchmarks.conftest"]
    command += ["--benchmark-only", f"--benchmark-json={report}", str(tmp_path / "test_two.py")]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=Path(__file__).parents[1], timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output[-3000:]  # the stopped one failed, nothing else
    assert "1 failed, 1 passed" in output and "ValueError" not in output, output[-3000:]
    assert [bench["name"] for bench in json.loads(report.read_text())["benchmarks"]] == [
        "test_measured"
    ]


def test_slowed_clocks_run_the_given_factor_slower() -> None:
    # In a process of its own: the clocks stay slowed in the process that slowed them.
    code = """
import time
real = lambda: time.clock_gettime(time.CLOCK_MONOTONIC)
from benchmarks.callgrind_run import dilate
dilate(10.0)
clocks = (time.perf_counter, time.monotonic, time.time)
before, start = [clock() for clock in clocks], real()
time.sleep(0.2)
after, elapsed = [clock() for clock in clocks], real() - start
print(all(abs((b - a) * 10 - elapsed) < 0.01 for a, b in zip(before, after)))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        cwd=Path(__file__).parents[1], timeout=60,
    )  # fmt: skip
    assert done.stdout.strip() == "True", done.stdout + done.stderr
