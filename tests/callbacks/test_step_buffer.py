"""StepBuffer: batching, order, NaN, flush (CPU; the CUDA path is the same with events)."""

from __future__ import annotations

import math

import pytest
import torch

from onthefly.callbacks._step_buffer import Norms, Row, StepBuffer, Steps


def test_rows_arrive_in_batches_of_every_steps_in_order() -> None:
    batches: list[list[Row]] = []
    buffer = StepBuffer(lambda steps: batches.append(steps.rows()), every_steps=3, every_s=1e9)
    for step in range(1, 8):
        buffer.add(step, 0, {"loss": torch.tensor(float(step)), "lr": 0.1})
    assert [[row.step for row in batch] for batch in batches] == [[1, 2, 3], [4, 5, 6]]
    buffer.flush()
    assert [row.step for row in batches[-1]] == [7]
    assert batches[0][1] == Row(2, 0, {"loss": 2.0, "lr": 0.1})


def test_values_keep_their_names_nan_and_dtypes() -> None:
    rows: list[Row] = []
    buffer = StepBuffer(lambda steps: rows.extend(steps.rows()), every_steps=100)
    buffer.add(1, 0, {"a": torch.tensor(float("nan")), "b": torch.tensor([3], dtype=torch.int64)})
    buffer.add(2, 1, {"b": torch.tensor(1.5, dtype=torch.bfloat16), "c": 2.0})
    buffer.flush()
    assert math.isnan(rows[0].values["a"]) and rows[0].values["b"] == 3.0
    assert rows[1] == Row(2, 1, {"b": 1.5, "c": 2.0})


def test_norms_ship_as_the_norm_of_the_whole_vector() -> None:
    rows: list[Row] = []
    buffer = StepBuffer(lambda steps: rows.extend(steps.rows()), every_steps=100)
    grads = [torch.tensor([3.0, 4.0]), torch.tensor([12.0], dtype=torch.float64)]
    buffer.add(1, 0, {"g": Norms(torch._foreach_norm(grads)), "loss": torch.tensor(0.5)})
    buffer.add(2, 0, {"g": Norms([torch.tensor(6.0), torch.tensor(8.0)])})
    buffer.add(3, 0, {"g": Norms([torch.tensor(2.0)])})  # fewer parts: reduced on its own
    buffer.flush()
    assert [row.values for row in rows] == [{"g": 13.0, "loss": 0.5}, {"g": 10.0}, {"g": 2.0}]


def test_time_triggers_a_flush() -> None:
    rows: list[Row] = []
    buffer = StepBuffer(lambda steps: rows.extend(steps.rows()), every_steps=1000, every_s=1e-9)
    buffer.add(1, 0, {"loss": torch.tensor(1.0)})
    assert [row.step for row in rows] == [1]


def test_bad_intervals_are_refused() -> None:
    with pytest.raises(ValueError, match="expected every_steps >= 1"):
        StepBuffer(print, every_steps=0)


def test_batches_of_steps_ship_as_columns_in_order() -> None:
    shipped: list[Steps] = []
    buffer = StepBuffer(shipped.append, every_steps=4, every_s=1e9)
    buffer.add_steps(Steps([1, 2], [0, 0], {"loss": [torch.tensor(1.0), torch.tensor(2.0)]}))
    buffer.add_steps(Steps([3, 4], [0, 1], {"loss": [torch.tensor(3.0), None], "lr": [0.1] * 2}))
    assert len(shipped) == 1  # four steps: one copy
    (steps,) = shipped
    assert steps.step == [1, 2, 3, 4] and steps.epoch == [0, 0, 0, 1]
    assert steps.values == {"loss": [1.0, 2.0, 3.0, None], "lr": [None, None, 0.1, 0.1]}
