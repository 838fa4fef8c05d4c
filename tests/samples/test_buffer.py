"""Per-batch device values reach the host in batch order, as one chunk per copy."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from onthefly.samples import buffer as buffer_module
from onthefly.samples.buffer import Chunk, SampleBuffer, Shipment, joined, read
from onthefly.samples.capture import SampleValues, training_values
from onthefly.samples.loss_spec import describe_loss


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
    assert len(shipped[0]) == 4 and shipped[0].held_bytes == 4 * 4  # two float32 pairs
    chunk = shipped[0].chunk()
    assert concatenated and chunk.ids.tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(chunk.loss, [0.1, 0.2, 0.3, 0.4], rtol=1e-6)


def test_losses_left_to_the_copy_equal_each_batch_evaluated_alone() -> None:
    # One loss call for the whole copy gives each sample the bits of its own batch's call;
    # batches whose scores differ in dtype are evaluated apart (a concatenation would
    # promote them).
    spec = describe_loss(nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=3))
    assert spec is not None
    chunks: list[Chunk] = []
    buffer = SampleBuffer(lambda shipped: chunks.append(shipped.chunk()), every_steps=100)
    g = torch.Generator().manual_seed(0)
    expected, start = [], 0
    for step, (size, dtype) in enumerate(
        [(5, torch.float32), (7, torch.float32), (1, torch.float64), (16, torch.float32)]
    ):
        scores = torch.randn(size, 6, generator=g, dtype=dtype).requires_grad_()
        target = torch.randint(0, 6, (size,), generator=g)
        values = training_values(spec, scores, target, size)
        assert values is not None and values.loss is None
        eager = spec.unreduced(scores.detach(), target).float()
        expected.append(torch.where(target == 3, torch.nan, eager))
        buffer.add(step, 0, list(range(start, start + size)), values)
        start += size
    buffer.add(9, 0, [start], SampleValues(torch.tensor([0.5])))  # computed in its step
    buffer.flush()
    (chunk,) = chunks
    want = torch.cat([*expected, torch.tensor([0.5])]).numpy()
    assert np.array_equal(chunk.loss, want, equal_nan=True)
    assert chunk.ids.tolist() == list(range(start + 1))


@pytest.mark.parametrize("change_options", [False, True], ids=["alike", "options changed"])
def test_a_copy_of_alike_batches_gives_each_batch_its_own_losses_and_classes(
    change_options: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Alike batches (one loss call, scores alike) take the copy's shortcut: one concatenation
    # of the scores for their losses and classes. A loss option changed between two batches
    # makes another call: the general path, with the same per-batch values.
    loss_fn = nn.CrossEntropyLoss(ignore_index=2)
    spec = describe_loss(loss_fn)
    assert spec is not None
    shortcut: list[Any] = []  # what each copy's shortcut gave (None: not taken)
    alike = buffer_module._kept_alike

    def spied(rows: Any) -> Any:
        shortcut.append(alike(rows))
        return shortcut[-1]

    monkeypatch.setattr(buffer_module, "_kept_alike", spied)
    chunks: list[Chunk] = []
    buffer = SampleBuffer(lambda shipped: chunks.append(shipped.chunk()), every_steps=100)
    g = torch.Generator().manual_seed(1)
    want_loss, want_class, start = [], [], 0
    for step, size in enumerate([4, 9, 1, 6]):
        if change_options and step == 2:
            loss_fn.label_smoothing = 0.3
        scores = torch.randn(size, 5, generator=g).requires_grad_()
        target = torch.randint(0, 5, (size,), generator=g)
        values = training_values(spec, scores, target, size)
        assert values is not None and values.loss is None
        alone = spec.unreduced(scores.detach(), target)
        want_loss.append(torch.where(target == 2, torch.nan, alone))
        want_class.append((scores.argmax(1) == target).float())
        buffer.add(step, 0, list(range(start, start + size)), values)
        start += size
    buffer.flush()
    (chunk,) = chunks
    assert len(shortcut) == 1 and (shortcut[0] is None) == change_options
    assert np.array_equal(chunk.loss, torch.cat(want_loss).numpy(), equal_nan=True)
    right = torch.cat(want_class).numpy()
    labels = chunk.label
    assert np.array_equal(chunk.correct[labels != 2], right[labels != 2])
    assert np.isnan(chunk.correct[labels == 2]).all()
    assert chunk.ids.tolist() == list(range(start))


def test_a_shipment_waiting_on_the_host_keeps_no_batch_of_its_own() -> None:
    # A shipment waits hundreds of steps for its history hand-over: it keeps the batches'
    # scores and labels joined, not each batch's tensors and values (objects the garbage
    # collector would walk at every pass until then), and still gives each batch its values.
    spec = describe_loss(nn.CrossEntropyLoss())
    assert spec is not None
    shipped: list[Shipment] = []
    buffer = SampleBuffer(shipped.append, every_steps=3, every_s=3600)
    g = torch.Generator().manual_seed(2)
    kept, want, start = [], [], 0
    for step, size in enumerate([5, 3, 4]):
        scores = torch.randn(size, 4, generator=g).requires_grad_()
        target = torch.randint(0, 4, (size,), generator=g)
        values = training_values(spec, scores, target, size)
        assert values is not None and values.predicted is not None and values.loss is None
        kept += [weakref.ref(values.predicted), weakref.ref(target)]
        want.append(spec.unreduced(scores.detach(), target))
        buffer.add(step, 0, list(range(start, start + size)), values)
        start += size
    del scores, target, values
    (shipment,) = shipped
    assert [ref() for ref in kept] == [None] * len(kept)  # the batches' own tensors are gone
    assert shipment.held_bytes == 12 * 4 * 4  # the joined scores
    chunk = shipment.chunk()
    np.testing.assert_array_equal(chunk.loss, torch.cat(want).numpy())
    assert (
        chunk.ids.tolist() == list(range(12)) and chunk.step.tolist() == [0] * 5 + [1] * 3 + [2] * 4
    )


def _shipments(every_steps: int) -> list[Shipment]:
    """Ten batches, shipped every ``every_steps``: alike batches, one batch whose loss its step
    computed (step 4), and another loss call from step 6 on (an option changed)."""
    loss_fn = nn.CrossEntropyLoss(ignore_index=1)
    spec = describe_loss(loss_fn)
    assert spec is not None
    shipped: list[Shipment] = []
    buffer = SampleBuffer(shipped.append, every_steps=every_steps, every_s=3600)
    g = torch.Generator().manual_seed(3)
    start = 0
    for step in range(10):
        loss_fn.label_smoothing = 0.2 if step >= 6 else 0.0
        size = 3 + step % 4
        scores = torch.randn(size, 5, generator=g).requires_grad_()
        target = torch.randint(0, 5, (size,), generator=g)
        values = training_values(spec, scores, target, size)
        assert values is not None and values.loss is None
        if step == 4:
            values = SampleValues(torch.rand(size, generator=g))
        buffer.add(step, step // 5, list(range(start, start + size)), values)
        start += size
    buffer.flush()
    return shipped


class _Broken:
    """A shipment whose reading fails (a bug)."""

    held_bytes = 0

    def __len__(self) -> int:
        return 2

    def chunk(self) -> Chunk:
        raise RuntimeError("a bug in reading")


def test_alike_shipments_read_together_give_what_each_gives_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A history hand-over reads its shipments together: a run of consecutive shipments of
    # alike batches (one loss call) is read as one: one loss call for the run, and every
    # sample with the bits its own shipment gives alone. Other shipments are read apart; one
    # that fails is skipped, the others kept.
    alone = joined([shipment.chunk() for shipment in _shipments(every_steps=2)])
    calls: list[int] = []
    columns = buffer_module._Deferred.columns

    def counted(self: Any) -> Any:
        calls.append(len(self.label))
        return columns(self)

    monkeypatch.setattr(buffer_module._Deferred, "columns", counted)
    shipped = _shipments(every_steps=2)  # [0 1] [2 3] | [4 5] | [6 7] [8 9]
    together = read([*shipped[:3], _Broken(), *shipped[3:]])
    assert together is not None
    assert calls == [3 + 4 + 5 + 6, 5 + 6 + 3 + 4]  # the two runs of alike shipments
    for name in ("ids", "loss", "correct", "label", "step", "epoch"):
        mine, want = getattr(together, name), getattr(alone, name)
        assert mine.dtype == want.dtype and np.array_equal(mine, want, equal_nan=True), name
    assert "could not read shipped per-sample values" in caplog.text
    assert read([_Broken()]) is None
