"""Where the training thread's time goes, by sampling: py-spy's stacks, sorted into parts.

The timers of ``test_step_profile`` measure each part's own code exactly, but only what
they wrap; a sampling profiler sees everything the training thread does, with nothing added
to the code. Each run (the seed MLP under both drivers, with and without OnTheFly, one
client watching the OnTheFly runs) trains ``STEPS`` steps twice: once unprofiled, for the
time per step, and once under ``py-spy record`` (``RATE`` samples a second, the process
paused for each, which slows it), for the shares. Each of the training thread's samples
inside the training loop (an epoch's work: not the run's start or end) goes to:

* the OnTheFly part its stack passes through (the innermost callback part, such as
  ``Telemetry`` called with the recorder's rows from the recorder's hooks; else the module
  of the outermost: the per-sample capture in the step, the data position around the
  loader, the session server's code), unless torch code runs below the part: torch code a
  part runs for the user (the fetch inside the data position's iterator) is the user's;
* else the user's work, named by the innermost of torch's ``utils/data`` (``fetch``),
  ``optim`` (``optimizer step``), ``autograd`` (``backward``) and ``nn`` (``forward``; a loss
  function's code is ``loss``) on the stack: Lightning runs the forward pass and the backward
  inside the optimizer's ``step``, as its closure;
* else the loop itself (the native trainer's loop and hook dispatch, or Lightning's).

A part's figure is its share of the samples times the unprofiled run's time per step, in µs.
py-spy leaves out the samples in which the thread is idle (waiting for the GIL, or for a
lock), so the shares are of the time the thread runs.

``make bench`` writes the table into benchmarks/RESULTS.md; ``python -m
benchmarks.test_sampled_profile run DRIVER on|off STEPS`` is one run (it prints its time
per step, in µs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.test_training_overhead import _lightning, _native
from benchmarks.workloads import WORKLOADS

STEPS = 8000
RATE = 250
"""Samples a second: py-spy pauses the process to take each, so more would slow it further."""

RUNS = {
    "native": ("native", "on"),
    "native, no OnTheFly": ("native", "off"),
    "lightning": ("lightning", "on"),
    "lightning, no OnTheFly": ("lightning", "off"),
}

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*):\d+\)$")

_LOOP = ("onthefly/native/", "onthefly/batches.py", "onthefly/callbacks/onthefly.py")
"""OnTheFly's code that is the loop around the user's work (the native trainer, and the hook
forwarding of the bundle under Lightning), not one of its parts."""

_MODULE_PARTS = {
    "onthefly/samples/attribution.py": "per-sample attribution (in the fetch)",
    "onthefly/samples/": "per-sample capture (in the step)",
    "onthefly/sessions/": "data position",
    "onthefly/server/": "session server (training thread)",
}
"""Parts named by the module their code is in (functions outside a callback's class)."""

_PARTS = frozenset(
    {
        "Recorder",
        "Checkpointer",
        "Telemetry",
        "Watchdog",
        "SampleTracker",
        "TestLauncher",
        "HealthMonitor",
        "HparamEditor",
        "ForkSpawner",
        "PauseGate",
    }
)
"""The parts of :class:`onthefly.OnTheFly`, by class name: a sample goes to the innermost
one its stack passes through."""

_USER = (
    ("torch/utils/data/", "user: fetch"),
    ("torch/optim/", "user: optimizer step"),
    ("torch/autograd/", "user: backward"),
    ("torch/_tensor.py", "user: backward"),
    ("torch/nn/", "user: forward"),
)
"""The user's work, by the innermost of these torch folders its stack passes through (a loss
is told apart first): Lightning runs the forward pass and the backward inside the optimizer's
``step``, as its closure."""


def part_of(stack: list[str]) -> str | None:
    """The part a training-thread stack (outermost frame first) belongs to, or ``None`` when
    it is not inside the training loop.

    OnTheFly's outermost part frame names the part, unless torch code runs below its innermost
    one (a part that wraps the user's work, e.g. the data position around the fetch): that is
    the user's work, named by the torch code it runs.
    """
    frames: list[tuple[str, str]] = []
    for frame in stack:
        match = _FRAME.match(frame)
        frames.append((match["function"], match["file"]) if match else (frame, ""))
    if not any(_in_training(function, file) for function, file in frames):
        return None
    own = [
        i
        for i, (_, file) in enumerate(frames)
        if file.startswith("onthefly/") and not file.startswith(_LOOP)
    ]
    below = own[-1] + 1 if own else 0
    torch_frames = [(fn, f) for fn, f in frames[below:] if f.startswith("torch/")]
    if torch_frames:
        if any(_is_loss(function, file) for function, file in torch_frames):
            return "user: loss"
        for _, file in reversed(torch_frames):  # the innermost: Lightning steps in a closure
            if file == "torch/autograd/profiler.py":
                continue  # record_function, around many torch calls
            part = next((part for prefix, part in _USER if file.startswith(prefix)), None)
            if part is not None:
                return part
        return "user: other torch"
    if own:
        # The innermost part: the recorder hands its rows to the other parts from its hooks.
        parts = [frames[i][0].split(".")[0] for i in own]
        named = [owner for owner in parts if owner in _PARTS]
        if named:
            return named[-1]
        function, file = frames[own[0]]
        for prefix, part in _MODULE_PARTS.items():
            if file.startswith(prefix):
                return part
        owner = function.split(".")[0]
        return owner if owner[:1].isupper() else file.removeprefix("onthefly/")
    if any(function.startswith("_StepClock.") for function, _ in frames):
        return "the benchmark's step clock"
    return "loop (the trainer's own code)"


def _in_training(function: str, file: str) -> bool:
    """Whether a frame is the training loop's: an epoch's work, not the run's start or end."""
    if file == "onthefly/native/loop.py":
        return function == "FitLoop._run_epoch"
    return file == "lightning/pytorch/loops/training_epoch_loop.py" or (
        file == "lightning/pytorch/loops/fit_loop.py"
        and function.endswith(("advance", "advance_start", "advance_end"))
    )


def _is_loss(function: str, file: str) -> bool:
    return file == "torch/nn/modules/loss.py" or (
        file == "torch/nn/functional.py" and ("loss" in function or "entropy" in function)
    )


def shares(raw: str) -> tuple[dict[str, float], int]:
    """Each part's share of the training thread's samples in py-spy's raw output, and the
    number of those samples."""
    counts: Counter[str] = Counter()
    lines = [line.rpartition(" ") for line in raw.splitlines()]
    # py-spy --threads puts "thread (ID): NAME" first; the name is missing on some samples.
    main = {t for stack, _, _ in lines if (t := stack.split(";")[0]).endswith(": MainThread")}
    ids = {t.split(":")[0] for t in main}
    for stack, _, count in lines:
        frames = stack.split(";")
        if frames[0].split(":")[0] not in ids:
            continue  # another thread
        part = part_of(frames[1:])
        if part is not None:
            counts[part] += int(count)
    total = sum(counts.values())
    return {part: n / total for part, n in counts.items()} if total else {}, total


def _run(driver: str, attached: str, steps: int) -> float:
    """One run in this process; its time per step in µs."""
    torch.set_num_threads(1)
    work = replace(WORKLOADS[0], steps=steps)
    if driver == "native":
        per_step = _native(work, session=attached == "on")
    else:
        per_step = _lightning(work, attach=attached == "on")
    return per_step.wall * 1e6


def _command(driver: str, attached: str) -> list[str]:
    module = "benchmarks.test_sampled_profile"
    return [sys.executable, "-m", module, "run", driver, attached, str(STEPS)]


def _py_spy() -> str | None:
    found = Path(sys.executable).with_name("py-spy")
    return str(found) if found.exists() else shutil.which("py-spy")


def profile(py_spy: str, driver: str, attached: str, folder: Path) -> dict[str, float]:
    """One run's parts in µs per step, plus its sample count and time per step."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        _command(driver, attached), env=env, capture_output=True, text=True, check=True
    )
    step_us = float(done.stdout.strip().splitlines()[-1])
    raw = folder / f"{driver}-{attached}.txt"
    sampled = [py_spy, "record", "--threads", "--format", "raw", "--rate", str(RATE)]
    sampled += ["--output", str(raw), "--", *_command(driver, attached)]
    subprocess.run(sampled, env=env, capture_output=True, text=True, check=True)
    found, samples = shares(raw.read_text())
    figures = {part: share * step_us for part, share in found.items()}
    figures["samples"] = samples
    figures["step (unprofiled)"] = step_us
    return figures


def _can_sample(py_spy: str | None) -> str | None:
    """Why py-spy cannot profile a child process here, or ``None`` when it can."""
    if py_spy is None:
        return "py-spy is not installed (it comes with the dev extras)"
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "probe.txt"
        probe = [py_spy, "record", "--format", "raw", "--output", str(out), "--"]
        probe += [sys.executable, "-c", "import time; time.sleep(0.3)"]
        done = subprocess.run(probe, capture_output=True, text=True)
        if done.returncode != 0:
            return f"py-spy cannot sample here: {done.stderr.strip()[-200:]}"
    return None


@pytest.mark.timeout(1200)  # four runs of STEPS steps, twice each: minutes when the machine is slow
def test_sampled_profile(benchmark: Any, tmp_path: Path) -> None:
    """The training thread's time by part, from py-spy's samples, under both drivers."""
    py_spy = _py_spy()
    reason = _can_sample(py_spy)
    if reason is not None:
        pytest.skip(reason)
    assert py_spy is not None

    def all_runs() -> dict[str, dict[str, float]]:
        return {name: profile(py_spy, *run, tmp_path) for name, run in RUNS.items()}

    results = benchmark.pedantic(all_runs, rounds=1, iterations=1)
    for name, figures in results.items():
        benchmark.extra_info[f"samples[{name}]"] = figures["samples"]
    labels = sorted({label for figures in results.values() for label in figures} - {"samples"})
    benchmark.extra_info["table"] = {
        "columns": ["µs per step (sampled)", *RUNS],
        "rows": [[label, *(results[name].get(label) for name in RUNS)] for label in labels],
    }


_NATIVE = [
    "Trainer.fit (onthefly/native/trainer.py:268)",
    "FitLoop._run_epoch (onthefly/native/loop.py:132)",
    "FitLoop._run_batch (onthefly/native/loop.py:207)",
]
_LIGHTNING = [
    "_FitLoop.advance (lightning/pytorch/loops/fit_loop.py:459)",
    "_TrainingEpochLoop.advance (lightning/pytorch/loops/training_epoch_loop.py:352)",
    "Optimizer.profile_hook_step.<locals>.wrapper (torch/optim/optimizer.py:514)",
    "_Module.training_step (benchmarks/test_training_overhead.py:96)",
]


@pytest.mark.parametrize(
    ("stack", "part"),
    [
        (["Hooks.call (onthefly/native/hooks.py:139)",
          "Telemetry.on_train_batch_end (onthefly/callbacks/telemetry.py:183)",
          "StepBuffer.add (onthefly/callbacks/_step_buffer.py:102)"], "Telemetry"),
        (["StepHooks call (onthefly/native/loop.py:207)",
          "Recorder.on_train_batch_end (onthefly/callbacks/_recorder.py:380)",
          "Recorder._flush (onthefly/callbacks/_recorder.py:460)",
          "Telemetry._receive (onthefly/callbacks/telemetry.py:218)",
          "StepBuffer.add_steps (onthefly/callbacks/_step_buffer.py:147)"], "Telemetry"),
        (["Recorder.on_train_batch_start (onthefly/callbacks/_recorder.py:330)"], "Recorder"),
        (["TrackedIterator.__next__ (onthefly/sessions/data_position.py:134)",
          "_BaseDataLoaderIter.__next__ (torch/utils/data/dataloader.py:732)",
          "record_function.__enter__ (torch/autograd/profiler.py:919)"], "user: fetch"),
        (["TrackedIterator.__next__ (onthefly/sessions/data_position.py:133)"], "data position"),
        (["observe (onthefly/samples/slot.py:88)"], "per-sample capture (in the step)"),
        (["CrossEntropyLoss.forward (torch/nn/modules/loss.py:1400)"], "user: loss"),
        (["Module._call_impl (torch/nn/modules/module.py:1789)",
          "ReLU.forward (torch/nn/modules/activation.py:144)",
          "relu (torch/nn/functional.py:1702)"], "user: forward"),
        (["Tensor.backward (torch/_tensor.py:630)"], "user: backward"),
        (["to_device (onthefly/native/device.py:41)"], "loop (the trainer's own code)"),
    ],
)  # fmt: skip
def test_a_native_sample_goes_to_the_part_its_stack_passes_through(
    stack: list[str], part: str
) -> None:
    assert part_of(_NATIVE + stack) == part


def test_lightning_runs_the_step_in_the_optimizer_s_closure() -> None:
    forward = ["Module._call_impl (torch/nn/modules/module.py:1789)"]
    assert part_of(_LIGHTNING + forward) == "user: forward"
    adam = ["Adam.step (torch/optim/adam.py:247)"]
    assert part_of(_LIGHTNING[:3] + adam) == "user: optimizer step"
    hook = [
        "_fan_out.<locals>.forward (onthefly/callbacks/onthefly.py:295)",
        "SampleTracker.on_train_batch_end (onthefly/callbacks/sample_tracker.py:191)",
    ]
    assert part_of(_LIGHTNING[:2] + hook) == "SampleTracker"


def test_samples_outside_the_training_loop_and_of_other_threads_are_left_out() -> None:
    end = "OnTheFly.on_fit_end (onthefly/callbacks/onthefly.py:254)"
    assert part_of(["Trainer.fit (onthefly/native/trainer.py:268)", end]) is None
    main = "thread (7): MainThread;" + ";".join(_NATIVE) + ";observe (onthefly/samples/slot.py:88)"
    raw = f"{main} 3\nthread (7);{';'.join(_NATIVE)} 1\nthread (8): onthefly-pump;{end} 5\n"
    found, samples = shares(raw)
    assert samples == 4
    assert found == {
        "per-sample capture (in the step)": 0.75,
        "loop (the trainer's own code)": 0.25,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        print(_run(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:  # the whole table, as JSON
        spy = _py_spy()
        reason = _can_sample(spy)
        if reason is not None or spy is None:
            sys.exit(reason)
        with tempfile.TemporaryDirectory() as tmp:
            table = {name: profile(spy, *run, Path(tmp)) for name, run in RUNS.items()}
        json.dump(table, sys.stdout, indent=1)
        print()
