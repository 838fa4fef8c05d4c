"""Per-batch device values reach the host in batch order, as one chunk per copy."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from onthefly.samples.buffer import Chunk, SampleBuffer, Shipment
from onthefly.samples.capture import SampleValues


def test_batches_are_shipped_every_n_steps_and_on_flush() -> None:
    chunks: list[Chunk] = []
    buffer = SampleBuffer(
        lambda shipped: chunks.append(shipped.chunk()), every_steps=2, every_s=3600
    )
    buffer.add(1, 0, [3, 1], SampleValues(torch.tensor([0.3, 0.1]), torch.tensor([1.0, 0.0])))
    assert chunks == []
    buffer.add(2, 0, torch.tensor([7]), SampleValues(torch.tensor([0.7])))
    buffer.add(
        3, 1, range(10, 12), SampleValues(torch.tensor([1.0, 1.1]), label=torch.tensor([4, 5]))
    )
    assert len(chunks) == 1
    first = chunks[0]
    assert first.ids.tolist() == [3, 1, 7]
    assert first.step.tolist() == [1, 1, 2]
    np.testing.assert_allclose(first.loss, [0.3, 0.1, 0.7], rtol=1e-6)
    assert first.correct.tolist()[:2] == [1.0, 0.0] and np.isnan(first.correct[2])
    buffer.flush()
    assert chunks[1].ids.tolist() == [10, 11]
    assert chunks[1].label.tolist() == [4.0, 5.0] and chunks[1].epoch.tolist() == [1, 1]


def test_scores_left_for_the_copy_give_the_same_correctness_as_classes() -> None:
    chunks: list[Chunk] = []
    buffer = SampleBuffer(
        lambda shipped: chunks.append(shipped.chunk()), every_steps=100, every_s=3600
    )
    loss, label = torch.tensor([0.1, 0.2]), torch.tensor([1, 0])
    scores = torch.tensor([[0.0, 2.0], [0.0, 1.0]])  # predicts 1, 1: right, wrong
    buffer.add(1, 0, [0, 1], SampleValues(loss, None, label, scores, -100))
    buffer.add(2, 0, [2, 3], SampleValues(loss, None, label, scores, -100))
    buffer.flush()  # all scores: one argmax for the copy
    buffer.add(3, 0, [4, 5], SampleValues(loss, None, label, scores, -100))
    buffer.add(4, 0, [6, 7], SampleValues(loss, None, label, torch.tensor([0, 0]), -100))
    buffer.flush()  # scores and classes mixed
    assert chunks[0].correct.tolist() == [1.0, 0.0, 1.0, 0.0]
    assert chunks[1].correct.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_values_on_the_cpu_are_concatenated_by_the_reader_not_at_the_flush(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped: list[Shipment] = []
    buffer = SampleBuffer(shipped.append, every_steps=2, every_s=3600)
    concatenated: list[Any] = []
    cat = torch.cat
    monkeypatch.setattr(torch, "cat", lambda *a, **k: concatenated.append(a) or cat(*a, **k))
    buffer.add(1, 0, [0, 1], SampleValues(torch.tensor([0.1, 0.2])))
    buffer.add(2, 0, [2, 3], SampleValues(torch.tensor([0.3, 0.4])))
    buffer.flush()
    assert len(shipped) == 1 and concatenated == []  # the training thread did no tensor work
    chunk = shipped[0].chunk()
    assert concatenated and chunk.ids.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(chunk.loss, [0.1, 0.2, 0.3, 0.4], rtol=1e-6)
