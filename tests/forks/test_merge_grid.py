"""Merge weights chosen on held-out data: the grid of each method and the best of it."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from onthefly.forks import merge_grid
from onthefly.forks.merging import MergeData, Options, merge
from onthefly.samples.loss_spec import describe_loss
from tests.forks import synthetic


def test_each_method_searches_what_the_user_left_open() -> None:
    soup = merge_grid.candidates("soup", 2, Options())
    assert [c.choice["weights"] for c in soup] == [
        [0.75, 0.125, 0.125],
        [0.5, 0.25, 0.25],
        [0.25, 0.375, 0.375],
        [0.0, 0.5, 0.5],
    ]
    assert len(merge_grid.candidates("soup", 1, Options(weights=[3.0, 1.0]))) == 1
    adapter = merge_grid.candidates("adapter", 2, Options())
    assert [c.options.weights for c in adapter][-1] == [1.0, 1.0]
    distill = merge_grid.candidates("distill", 1, Options())
    assert [(c.options.temperature, c.options.strength) for c in distill] == [
        (1.0, 0.5),
        (1.0, 1.0),
        (4.0, 0.5),
        (4.0, 1.0),
    ]
    pinned = merge_grid.candidates("distill", 1, Options(), temperature=2.0)
    assert [c.choice for c in pinned] == [
        {"temperature": 2.0, "strength": 0.5},
        {"temperature": 2.0, "strength": 1.0},
    ]
    assert [c.choice for c in merge_grid.candidates("fisher", 1, Options())] == [{}]


def test_the_best_candidate_on_validation_is_kept() -> None:
    torch.set_num_threads(1)
    task = synthetic.make_task()
    parent, specialist = synthetic.parent_and_specialist()
    train = DataLoader(task.train, batch_size=64)
    spec = describe_loss(torch.nn.CrossEntropyLoss())
    assert spec is not None
    data = MergeData(train=train, spec=spec, slices=[task.hard_train_idx], rest=[])

    def score(model: torch.nn.Module) -> float:
        return synthetic.loss_on(model, task.val)

    grid = merge_grid.candidates("soup", 1, Options())
    chosen = merge_grid.choose("soup", parent, [specialist], data, grid, score)
    assert chosen is not None
    expected = [score(merge("soup", parent, [specialist], data, c.options).model) for c in grid]
    assert [g["score"] for g in chosen.grid] == pytest.approx(expected)
    best = min(range(len(grid)), key=expected.__getitem__)
    assert chosen.choice == grid[best].choice
    assert score(chosen.merged.model) == pytest.approx(expected[best])


def test_a_cancelled_grid_builds_nothing() -> None:
    parent, specialist = synthetic.parent_and_specialist()
    task = synthetic.make_task()
    spec = describe_loss(torch.nn.CrossEntropyLoss())
    assert spec is not None
    data = MergeData(
        train=DataLoader(task.train, batch_size=64),
        spec=spec,
        slices=[task.hard_train_idx],
        rest=[],
        cancelled=lambda: True,
    )
    grid = merge_grid.candidates("soup", 1, Options())
    assert merge_grid.choose("soup", parent, [specialist], data, grid, lambda m: 0.0) is None
