"""Pause anywhere, export, stop, resume in a new process: the losses are the uninterrupted
run's, bit for bit (a property over pause points; see ``tests/sessions/pause_points.py``)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from onthefly.sessions.archive import SessionArchive
from tests.sessions.pause_points import (
    BATCHES,
    STEPS,
    Config,
    PausePoint,
    paused_run,
    resume_in_new_process,
    train,
)

CONFIGS = [Config(2, False), Config(0, True), Config(2, True), Config(0, False)]

AWKWARD = [
    PausePoint(1, "end"),  # the run's first step
    PausePoint(BATCHES, "end"),  # an epoch's last batch, before its validation
    PausePoint(BATCHES, "start"),  # the next epoch's first batch: after validation and StepLR
    PausePoint(BATCHES + 1, "end"),  # the first batch of an epoch, trained
    PausePoint(3, "start"),  # mid-epoch, at a batch's start: fetched (workers prefetch)
    PausePoint(2 * BATCHES, "start"),  # after the second validation
    PausePoint(STEPS - 1, "end"),  # the run's second-to-last step
]


def random_points(count: int, seed: int) -> list[PausePoint]:
    draw = random.Random(seed)
    return [
        PausePoint(draw.randrange(1, STEPS), draw.choice(["end", "start"])) for _ in range(count)
    ]


class References:
    """The uninterrupted run of each configuration, trained once per module."""

    def __init__(self) -> None:
        self._losses: dict[Config, list[float]] = {}

    def __call__(self, config: Config) -> list[float]:
        if config not in self._losses:
            self._losses[config] = train(config, [])
        return self._losses[config]


@pytest.fixture(scope="module")
def references() -> References:
    return References()


def check_point(
    config: Config, point: PausePoint, references: References, home: Path, tmp_path: Path
) -> None:
    path = tmp_path / f"{config}-{point}.otf"
    first, answers = paused_run(config, point, path, home)
    assert [a["type"] for a in answers] == ["reply"] * 3, answers
    pause, export, stop = (a["data"] for a in answers)
    # The export names the step it holds, and the stop trains nothing after it.
    assert pause["step"] == export["step"] == stop["step"] == point.step == len(first)
    with SessionArchive(path) as archive:
        assert archive.manifest.step == point.step

    rest = resume_in_new_process(config, path, home)

    assert len(first) + len(rest) == STEPS
    assert first + rest == references(config)


POINTS = AWKWARD + random_points(3, seed=16)


@pytest.mark.parametrize(
    ("config", "point"),
    [(CONFIGS[i % len(CONFIGS)], point) for i, point in enumerate(POINTS)],
    ids=lambda value: str(value),
)
def test_a_run_resumed_at_any_point_trains_the_uninterrupted_losses(
    config: Config,
    point: PausePoint,
    references: References,
    onthefly_home: Path,
    tmp_path: Path,
) -> None:
    check_point(config, point, references, onthefly_home, tmp_path)


@pytest.mark.stress
@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("seed", range(13))
def test_a_run_resumed_at_random_points_trains_the_uninterrupted_losses(
    config: Config, seed: int, references: References, onthefly_home: Path, tmp_path: Path
) -> None:
    # 4 configurations x 13 seeds: 52 pause points.
    (point,) = random_points(1, seed=1000 * CONFIGS.index(config) + seed)
    check_point(config, point, references, onthefly_home, tmp_path)
