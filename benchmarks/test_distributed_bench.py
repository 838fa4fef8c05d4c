"""What OnTheFly costs a 2-rank DDP run (gloo, CPU), and how late a pause lands.

The MLP workload (32-64-2 on 4096x32 features, batch 128, Adam) under 2-rank DDP, per step
from step 10 to 256, the drivers interleaved round by round so machine noise hits all; wall
time (the slower rank's) and rank 0's CPU time (all its threads: the session server's too),
which other load on a shared machine disturbs far less:

* ``plain``: a hand-written DDP loop (reference);
* ``bare``: ``onthefly.Trainer(session=False)``, the same DDP run without OnTheFly;
* ``onthefly``: with OnTheFly (server on rank 0, adaptive control rounds);
* ``onthefly, round every step``: ``ONTHEFLY_SYNC_EVERY=1``, for the per-step cost of the
  control collective itself.

Target: onthefly/bare ≤ 1.10. Then the pause latency: a client pauses the run at random
moments; the latency is the acknowledged step minus the step running when the command was
sent (0: it landed at the end of that step).
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from tests.callbacks.live import LiveClient, wait_for_session
from tests.distributed.ranks import launched

SCRIPT = "benchmarks.distributed_run"
ROUNDS = 3
TARGET = 1.10
PAUSES = 6
CONFIGS: dict[str, tuple[str, dict[str, str]]] = {
    "plain": ("plain", {}),
    "bare": ("bare", {}),
    "onthefly": ("onthefly", {}),
    "onthefly, round every step": ("onthefly", {"ONTHEFLY_SYNC_EVERY": "1"}),
}


def _run(mode: str, env: dict[str, str], home: Path, folder: Path) -> dict[str, Any]:
    with launched(SCRIPT, ["--mode", mode, "--out", str(folder)], home, folder, env=env) as ranks:
        codes = ranks.wait(timeout=300)
    assert codes == [0, 0], ranks.err(0)
    results = [json.loads((folder / f"result.{rank}.json").read_text()) for rank in (0, 1)]
    # DDP keeps the ranks in step: the slower rank's time is the run's.
    slowest = max(results, key=lambda r: r["s_per_step"])
    return {**results[0], "s_per_step": slowest["s_per_step"]}  # CPU time: rank 0's


def _measure(home: Path, folder: Path) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in CONFIGS}
    for round_ in range(ROUNDS):
        for name, (mode, env) in CONFIGS.items():
            where = folder / f"{round_}-{mode}-{len(env)}"
            results[name].append(_run(mode, env, home, where))
    return results


def test_distributed_overhead(benchmark: Any, onthefly_home: Path, tmp_path: Path) -> None:
    results = benchmark.pedantic(_measure, args=(onthefly_home, tmp_path), rounds=1, iterations=1)
    ms = _median_ms(results, "s_per_step")
    cpu = _median_ms(results, "cpu_s_per_step")
    every, adaptive = results["onthefly, round every step"], results["onthefly"]
    benchmark.extra_info.update(
        {f"ms_per_step[{name}]": value for name, value in ms.items()}
        | {f"cpu_ms_per_step[{name}]": value for name, value in cpu.items()}
        | {
            "onthefly/bare": ms["onthefly"] / ms["bare"],
            "cpu: onthefly/bare": cpu["onthefly"] / cpu["bare"],
            "cpu: round every step/bare": cpu["onthefly, round every step"] / cpu["bare"],
            "bare/plain": ms["bare"] / ms["plain"],
            "target": TARGET,
            "cpu: added_us_per_step[onthefly]": (cpu["onthefly"] - cpu["bare"]) * 1e3,
            "cpu: added_us_per_step[round every step]": (
                cpu["onthefly, round every step"] - cpu["bare"]
            )
            * 1e3,
            "control_round_us[every step]": statistics.median(r["round_s"] for r in every) * 1e6,
            "control_round_us[adaptive]": statistics.median(r["round_s"] for r in adaptive) * 1e6,
            "control_interval[adaptive]": statistics.median(r["interval"] for r in adaptive),
        }
    )


def _median_ms(results: dict[str, list[dict[str, Any]]], key: str) -> dict[str, float]:
    return {name: statistics.median(r[key] for r in runs) * 1e3 for name, runs in results.items()}


def test_pause_latency_in_steps(benchmark: Any, onthefly_home: Path, tmp_path: Path) -> None:
    def measure() -> list[tuple[float, int]]:
        sent: list[tuple[float, int]] = []
        args = ["--mode", "onthefly", "--out", str(tmp_path), "--steps", "100000"]
        with launched(SCRIPT, args, onthefly_home, tmp_path) as ranks:
            client = LiveClient(wait_for_session(onthefly_home, timeout=120))
            client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 100)
            for _ in range(PAUSES):
                time.sleep(random.uniform(0.1, 0.3))
                at = time.time()
                sent.append((at, int(client.call("pause")["data"]["step"])))
                client.call("resume")
            client.call("stop")
            assert ranks.wait(timeout=120) == [0, 0], ranks.err(0)
            client.close()
        return sent

    sent = benchmark.pedantic(measure, rounds=1, iterations=1)
    started = json.loads((tmp_path / "result.0.json").read_text())["started"]
    # Step n started at started[n - 1]: the step running at time t is the count started by t.
    latencies = [ack - sum(1 for s in started if s <= at) for at, ack in sent]
    interval = json.loads((tmp_path / "result.0.json").read_text())["interval"]
    benchmark.extra_info.update(
        {
            "pause_latency_steps[median]": statistics.median(latencies),
            "pause_latency_steps[max]": max(latencies),
            "control_interval": interval,
            "pauses": len(latencies),
        }
    )
    assert all(0 <= latency <= 2 * interval for latency in latencies), latencies
