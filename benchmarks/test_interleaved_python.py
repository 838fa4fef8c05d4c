"""What Python run between the user's operations costs a step beyond its own time.

OnTheFly's per-step work is ~170 short Python calls spread over the step's hooks
(``test_step_calls``), and the user's own work (fetch, forward, loss, backward, optimizer
step) is slower with it than without it, by more than any part of OnTheFly does
(``test_step_profile``, ``test_sampled_profile``). This benchmark measures that effect
without OnTheFly: a hand-written loop of the seed MLP runs a stand-in of the same shape,
``CALLS`` calls a step of distinct small functions, each on an object of its own class (a
dict read, attribute reads and writes, an ``isinstance``, a list append), either

* nowhere (``none``),
* in one block after the optimizer step (``block``), or
* spread over the step's six boundaries (``spread``: before and after the fetch, after the
  forward pass, the loss, the backward pass and the optimizer step), as hooks are.

Every mode reads the clock at the same six points; the stand-in's own time is what those
clocks see around it, and the user's work is the step's time less it. The figures are
microseconds a step, medians over rounds in which the modes alternate their order. The
stand-in is timed hot too (in a loop of its own), for what it costs where it is the only
code running.

``python -m benchmarks.test_interleaved_python`` prints the figures as JSON.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from benchmarks.workloads import WORKLOADS, Workload, make_loader

CALLS = 180
"""Stand-in calls a step: about OnTheFly's per-step count under the native trainer."""
FUNCTIONS = 60
"""Distinct functions (and classes) the calls go through."""
POINTS = 6
STEPS = 384
WARMUP = 10
ROUNDS = 12
MODES = ("none", "block", "spread")

_TEMPLATE = """
class Part{n}:
    def __init__(self):
        self.seen_{n} = 0
        self.values_{n} = {{"loss_{n}": 0.5, "lr_{n}": {n}.0}}
        self.rows_{n} = []
        self.flag_{n} = False

def call_{n}(part):
    value = part.values_{n}.get("lr_{n}")
    if isinstance(value, float) and not part.flag_{n}:
        part.seen_{n} += 1
        rows = part.rows_{n}
        rows.append(value)
        if len(rows) > {limit}:
            rows.clear()
"""


def stand_in() -> Callable[[int], None]:
    """A function that makes ``k`` calls of the stand-in, going round its functions."""
    namespace: dict[str, Any] = {}
    for n in range(FUNCTIONS):
        exec(_TEMPLATE.format(n=n, limit=32 + n), namespace)  # distinct code and names
    calls = [(namespace[f"call_{n}"], namespace[f"Part{n}"]()) for n in range(FUNCTIONS)]
    position = 0

    def run(k: int) -> None:
        nonlocal position
        for _ in range(k):
            function, part = calls[position]
            function(part)
            position = (position + 1) % FUNCTIONS

    return run


@dataclass(frozen=True)
class Split:
    """Seconds a step: the whole step, and the stand-in's own share of it."""

    step: float
    stand_in: float


def run(work: Workload, mode: str) -> Split:
    """Train the plain loop ``work.steps`` steps with the stand-in placed as ``mode`` says."""
    torch.manual_seed(0)
    model = work.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    loader = make_loader(work)
    filler = stand_in()
    per_point = CALLS // POINTS if mode == "spread" else 0
    at_end = CALLS if mode == "block" else per_point
    spent = 0.0
    clock = time.perf_counter

    def point(k: int) -> None:
        nonlocal spent
        started = clock()
        if k:
            filler(k)
        spent += clock() - started

    steps = 0
    start = end = 0.0
    while steps < work.steps:
        batches = iter(loader)
        while steps < work.steps:
            if steps == WARMUP:
                start, spent = clock(), 0.0
            point(per_point)
            try:
                x, y = next(batches)
            except StopIteration:
                break
            point(per_point)
            opt.zero_grad()
            scores = model(x)
            point(per_point)
            loss = loss_fn(scores, y)
            point(per_point)
            loss.backward()
            point(per_point)
            opt.step()
            point(at_end)
            steps += 1
            end = clock()
    counted = work.steps - WARMUP
    return Split((end - start) / counted, spent / counted)


def hot_cost(repeats: int = 200) -> float:
    """Seconds the stand-in's ``CALLS`` calls take in a loop of their own (the least of 5)."""
    filler = stand_in()
    filler(CALLS * 4)  # warm
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(repeats):
            filler(CALLS)
        best = min(best, (time.perf_counter() - started) / repeats)
    return best


def measure(work: Workload, rounds: int = ROUNDS) -> dict[str, float]:
    """The figures, in µs a step, medians over ``rounds`` alternating rounds."""
    torch.set_num_threads(1)
    splits: dict[str, list[Split]] = {mode: [] for mode in MODES}
    for r in range(rounds):
        for mode in MODES if r % 2 == 0 else reversed(MODES):
            splits[mode].append(run(work, mode))
    figures = {"stand-in, hot": hot_cost() * 1e6}
    user = {mode: [s.step - s.stand_in for s in found] for mode, found in splits.items()}
    for mode in MODES:
        figures[f"{mode}: step"] = statistics.median(s.step for s in splits[mode]) * 1e6
        figures[f"{mode}: user's work"] = statistics.median(user[mode]) * 1e6
        if mode != "none":
            figures[f"{mode}: stand-in"] = statistics.median(s.stand_in for s in splits[mode]) * 1e6
            # Round by round: the user's work slowed, against the same round's bare run.
            slowed = [u - base for u, base in zip(user[mode], user["none"], strict=True)]
            figures[f"{mode}: user's work slowed by"] = statistics.median(slowed) * 1e6
    return figures


def test_interleaved_python(benchmark: Any) -> None:
    """How much the user's work slows when OnTheFly-shaped Python runs between its steps."""
    work = WORKLOADS[0]
    figures = benchmark.pedantic(
        lambda: measure(replace(work, steps=STEPS)), rounds=1, iterations=1
    )
    benchmark.extra_info.update(figures)
    rows = []
    for mode in MODES[1:]:
        own, slowed = figures[f"{mode}: stand-in"], figures[f"{mode}: user's work slowed by"]
        rows.append([mode, own, slowed, slowed / own, figures[f"{mode}: step"]])
    benchmark.extra_info["table"] = {
        "columns": [
            f"{CALLS} calls a step",
            "their own time (µs)",
            "user's work slowed by (µs)",
            "slowed / own",
            "step (µs)",
        ],
        "rows": [
            ["none", None, None, None, figures["none: step"]],
            *rows,
            ["hot, alone", figures["stand-in, hot"], None, None, None],
        ],
    }


if __name__ == "__main__":
    print(json.dumps(measure(replace(WORKLOADS[0], steps=STEPS)), indent=2))
