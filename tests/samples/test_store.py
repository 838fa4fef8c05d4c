"""Running per-sample statistics equal the statistics of every observation, kept in O(N)."""

from __future__ import annotations

import dataclasses
import io
import itertools

import numpy as np
import pytest
import torch

from onthefly.samples.buffer import Chunk
from onthefly.samples.store import NoData, SampleStore, ScanResult, TrainingStats


def _chunk(
    ids: list[int], losses: list[float], step: int, correct: list[float] | None = None
) -> Chunk:
    n = len(ids)
    return Chunk(
        ids=np.array(ids, dtype=np.int64),
        loss=np.array(losses, dtype=np.float32),
        correct=np.array(correct if correct is not None else [np.nan] * n, dtype=np.float32),
        label=np.array([i % 3 for i in ids], dtype=np.float64),
        step=np.full(n, step, dtype=np.int64),
        epoch=np.zeros(n, dtype=np.int32),
    )


@pytest.mark.parametrize("repeats", [True, False], ids=["repeats", "distinct"])
def test_chunked_updates_equal_the_plain_statistics(repeats: bool) -> None:
    rng = np.random.default_rng(0)
    stats = TrainingStats()
    seen: dict[int, list[float]] = {}
    for step in range(1, 30):
        # Repeats inside a chunk take the general path; distinct ids (an epoch) the fast one.
        ids = (rng.integers(0, 50, size=16) if repeats else rng.permutation(50)[:16]).tolist()
        losses = rng.random(16).astype(np.float32).tolist()
        stats.update(_chunk(ids, losses, step))
        for i, value in zip(ids, losses, strict=True):
            seen.setdefault(i, []).append(float(np.float32(value)))
    for i, values in seen.items():
        assert stats.count[i] == len(values)
        assert stats.loss_mean[i] == pytest.approx(np.mean(values))
        assert stats.loss_m2[i] / len(values) == pytest.approx(np.var(values), abs=1e-12)
        confidence = np.exp(-np.array(values))
        assert stats.conf_mean[i] == pytest.approx(confidence.mean())
        assert stats.conf_m2[i] / len(values) == pytest.approx(confidence.var(), abs=1e-12)
        assert stats.loss_last[i] == pytest.approx(values[-1])
    assert stats.size <= 50 * 2  # grows with the dataset, not with the steps


def test_nan_losses_and_unknown_ids_are_skipped_and_correctness_averages() -> None:
    stats = TrainingStats()
    stats.update(_chunk([0, 1, 2], [1.0, float("nan"), 2.0], 1, correct=[1.0, 1.0, np.nan]))
    stats.update(_chunk([0, -1], [3.0, 9.0], 2, correct=[0.0, 1.0]))
    assert stats.count.tolist()[:3] == [2, 0, 1]
    view = SampleStore()
    view.training = stats
    train = view.view("train")
    assert train.ids.tolist() == [0, 2]
    assert train.correct[0] == 0.5 and np.isnan(train.correct[1])
    assert train.step == 2


def test_views_prefer_the_latest_scan_and_say_when_data_is_missing() -> None:
    store = SampleStore()
    with pytest.raises(NoData, match="train a few steps"):
        store.view("train")
    with pytest.raises(NoData, match="never scanned"):
        store.view("val")
    store.training.update(_chunk([0, 1], [1.0, 2.0], 5))
    assert store.view("train").source == "training"
    scan = ScanResult(
        "train",
        9,
        0,
        np.array([0, 1, 2]),
        np.array([0.5, 1, 1.5], np.float32),
        np.full(3, np.nan, np.float32),
        np.full(3, np.nan, np.float32),
        np.full(3, np.nan),
    )
    store.scans["train"] = scan
    assert store.view("train").source == "scan"
    assert store.view("train", "training").step == 5
    with pytest.raises(NoData, match="train split only"):
        store.view("val", "training")


def test_positions_find_ids_in_their_given_order() -> None:
    store = SampleStore()
    store.training.update(_chunk([5, 2, 9], [1.0, 2.0, 3.0], 1))
    view = store.view("train")
    rows = view.positions(np.array([9, 4, 2]))
    assert view.ids[rows].tolist() == [9, 2]


def test_the_state_survives_a_weights_only_round_trip() -> None:
    store = SampleStore()
    store.training.update(_chunk([0, 3], [1.0, 2.0], 4))
    store.scans["val"] = ScanResult(
        "val",
        4,
        0,
        np.arange(2),
        np.ones(2, np.float32),
        np.ones(2, np.float32),
        np.zeros(2, np.float32),
        np.ones(2),
        embedding=np.ones((2, 3), np.float32),
    )
    buffer = io.BytesIO()
    torch.save(store.state_dict(), buffer)
    buffer.seek(0)
    restored = SampleStore()
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert restored.training.count.tolist() == store.training.count.tolist()
    assert restored.training.last_step == 4
    assert restored.scans["val"].embedding is not None
    assert restored.view("val").loss.tolist() == [1.0, 1.0]


def test_the_statistics_do_not_depend_on_where_chunks_begin_and_end() -> None:
    # A paused or resumed run ships its values at other moments than an uninterrupted one.
    rng = np.random.default_rng(1)
    ids = np.concatenate([rng.permutation(20) for _ in range(5)])  # 5 epochs of 20 samples
    losses = rng.random(len(ids)).astype(np.float32).tolist()
    states = []
    for cuts in ([0, 100], [0, 7, 33, 34, 80, 100], list(range(0, 101, 4))):
        stats = TrainingStats()
        for start, end in itertools.pairwise(cuts):
            chunk = _chunk(ids[start:end].tolist(), losses[start:end], 0)
            steps = np.arange(start, end, dtype=np.int64) // 4 + 1  # batches of 4
            stats.update(dataclasses.replace(chunk, step=steps))
        states.append({name: array[:20].copy() for name, array in stats.arrays.items()})
    for other in states[1:]:
        for name, array in states[0].items():
            assert np.array_equal(array, other[name], equal_nan=True), name


@pytest.mark.parametrize("with_replacement", [False, True], ids=["epochs", "repeats"])
def test_a_chunk_of_several_epochs_folds_as_one_observation_at_a_time(
    with_replacement: bool,
) -> None:
    # A chunk often spans an epoch boundary: each epoch is a round of distinct ids, folded
    # without a sort; a sampler drawing with replacement repeats ids within an epoch.
    rng = np.random.default_rng(2)
    draw = (lambda: rng.integers(0, 30, 30)) if with_replacement else (lambda: rng.permutation(30))
    ids = np.concatenate([draw() for _ in range(4)])
    chunk = Chunk(
        ids=ids,
        loss=rng.random(len(ids)).astype(np.float32),
        correct=rng.integers(0, 2, len(ids)).astype(np.float32),
        label=np.full(len(ids), np.nan),
        step=np.arange(len(ids), dtype=np.int64) // 6 + 1,
        epoch=np.repeat(np.arange(4, dtype=np.int32), 30),
    )
    whole, one_by_one = TrainingStats(), TrainingStats()
    whole.update(chunk)
    for i in range(len(ids)):
        one_by_one.update(Chunk(*(np.asarray(f)[i : i + 1] for f in dataclasses.astuple(chunk))))
    for name, array in whole.arrays.items():
        assert np.array_equal(array[:30], one_by_one.arrays[name][:30], equal_nan=True), name
