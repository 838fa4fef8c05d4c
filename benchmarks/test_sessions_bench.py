"""Session files: export and import of a ~100 MB model state against bare torch.save/load.

Both sides write and read the same state dicts (model + optimizer) in the same run:

* export: ``payload.write`` (zip, manifest, RNG and data position, atomic rename with fsync)
  against ``torch.save`` of the same dicts to a plain file, without and with an fsync (the
  target applies to the latter: the same durability);
* import: ``resume.read`` (manifest validation, ``weights_only`` loading, checksum
  verification) against ``torch.load(weights_only=True)``.

Target: each at most 1.3x its baseline. Ratios use the fastest of several rounds on each
side, the figure least disturbed by other work on a shared machine; medians are recorded too.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from onthefly.sessions import payload, resume, rng
from onthefly.sessions.data_position import DataPosition
from onthefly.sessions.manifest import Manifest

ROUNDS = 5
TARGET = 1.3


@pytest.fixture(scope="module")
def state() -> dict[str, Any]:
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(24)])  # 24 x 4 MiB ~ 100 MB
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict()}


def _payload(state: dict[str, Any]) -> payload.Payload:
    manifest = Manifest(project="bench", run="r", run_name="r", driver="native", step=1, epoch=0)
    return payload.Payload(
        manifest=manifest,
        tensors={
            payload.MODEL: state["model"],
            payload.TRAINER: {"optimizer": state["optimizer"], "global_step": 1},
            payload.RNG: {"ranks": [rng.capture()]},
            payload.DATA: {"loaders": [DataPosition(rng.capture()).to_state()]},
        },
    )


def _times(fn: Callable[[], Any]) -> list[float]:
    fn()  # warm-up: page cache, allocator
    times = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return times


def _record(benchmark: Any, ours: list[float], bare: list[float], size: int) -> float:
    ratio = min(ours) / min(bare)
    benchmark.extra_info.update(
        {
            "bytes": size,
            "ours_s_min": min(ours),
            "bare_s_min": min(bare),
            "ours_s_median": statistics.median(ours),
            "bare_s_median": statistics.median(bare),
            "ratio_min": ratio,
            "ratio_median": statistics.median(ours) / statistics.median(bare),
            "target": TARGET,
        }
    )
    return ratio


def _save_durably(state: dict[str, Any], path: Path) -> None:
    with path.open("wb") as out:
        torch.save(state, out)
        out.flush()
        os.fsync(out.fileno())


def test_export_against_torch_save(benchmark: Any, state: dict[str, Any], tmp_path: Path) -> None:
    bundle = _payload(state)
    bare = _times(lambda: torch.save(state, tmp_path / "bare.pt"))
    durable = _times(lambda: _save_durably(state, tmp_path / "durable.pt"))
    ours = _times(lambda: payload.write(bundle, tmp_path / "ours.otf"))
    benchmark.pedantic(lambda: payload.write(bundle, tmp_path / "ours.otf"), rounds=1)
    _record(benchmark, ours, bare, (tmp_path / "ours.otf").stat().st_size)
    # The export fsyncs (a crash must not leave a half-written file behind a complete
    # name); the like-for-like baseline is torch.save followed by fsync.
    ratio = min(ours) / min(durable)
    benchmark.extra_info.update({"durable_s_min": min(durable), "ratio_to_durable_min": ratio})
    assert ratio <= TARGET


def test_import_against_torch_load(benchmark: Any, state: dict[str, Any], tmp_path: Path) -> None:
    payload.write(_payload(state), tmp_path / "ours.otf")
    torch.save(state, tmp_path / "bare.pt")
    bare = _times(lambda: torch.load(tmp_path / "bare.pt", weights_only=True))
    ours = _times(lambda: resume.read(tmp_path / "ours.otf"))
    benchmark.pedantic(lambda: resume.read(tmp_path / "ours.otf"), rounds=1)
    ratio = _record(benchmark, ours, bare, (tmp_path / "ours.otf").stat().st_size)
    assert ratio <= TARGET
