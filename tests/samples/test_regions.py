"""Data-map regions, boxes and the mislabel estimate, on hand-made views and on real
training statistics of digits with planted label noise, before and after memorisation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from onthefly.errors import ConfigurationError
from onthefly.samples.buffer import Chunk
from onthefly.samples.regions import box_rows, low_group_size, region_rows
from onthefly.samples.selection import Criterion, choose
from onthefly.samples.store import SampleStore, SampleView
from tests.samples import noisy_digits
from tests.samples.conftest import make_view


def test_regions_rank_by_confidence_and_variability(view: SampleView) -> None:
    easy = region_rows(view, "easy", fraction=0.2)
    hard = region_rows(view, "hard", fraction=0.2)
    ambiguous = region_rows(view, "ambiguous", fraction=0.2)
    assert len(easy) == len(hard) == len(ambiguous) == 20
    assert np.all(np.diff(view.confidence[easy]) <= 0)  # most confident first
    assert np.all(np.diff(view.confidence[hard]) >= 0)  # least confident first
    assert np.all(np.diff(view.variability[ambiguous]) <= 0)
    assert view.confidence[easy].min() > view.confidence[hard].max()
    assert view.variability[ambiguous].min() >= np.quantile(view.variability, 0.8) - 1e-12


def test_hard_is_never_cut_by_variability() -> None:
    """A memorised mislabel: low mean confidence, the highest variability. It stays hard."""
    view = make_view()
    view.confidence[50] = 1e-6  # the least confident sample ...
    view.variability[50] = 0.5  # ... and by far the most variable one
    hard = region_rows(view, "hard", fraction=0.1)
    assert hard[0] == 50
    assert 50 in region_rows(view, "ambiguous", fraction=0.1)  # regions may overlap


def test_a_size_takes_exactly_that_many_and_the_default_share_is_a_third(
    view: SampleView,
) -> None:
    assert len(region_rows(view, "hard", size=7)) == 7
    assert len(region_rows(view, "easy", size=1000)) == len(view)
    assert len(region_rows(view, "ambiguous")) == 33
    with pytest.raises(ConfigurationError, match="fraction or a size"):
        region_rows(view, "hard", fraction=0.1, size=3)
    with pytest.raises(ConfigurationError, match="expected one of easy, ambiguous, hard"):
        region_rows(view, "unlearnable")


def test_mislabeled_ranks_by_confidence_or_with_correctness() -> None:
    view = make_view()
    view.correct[:] = 1.0
    view.correct[[60, 70]] = 0.0  # confident-ish but never predicted right
    by_confidence = region_rows(view, "mislabeled", size=5)
    assert by_confidence.tolist() == region_rows(view, "hard", size=5).tolist()
    combined = region_rows(view, "mislabeled", size=5, with_correctness=True)
    assert {60, 70} <= set(combined.tolist())
    # Where correctness is unknown (regression), the key is the confidence alone.
    view.correct[:] = np.nan
    unknown = region_rows(view, "mislabeled", size=5, with_correctness=True)
    assert unknown.tolist() == by_confidence.tolist()


def test_the_low_group_of_otsus_split_counts_the_low_cluster() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.normal(0.1, 0.05, 40), rng.normal(0.9, 0.05, 360)])
    assert low_group_size(values) == 40
    assert low_group_size(np.full(10, 0.5)) == 1
    assert low_group_size(np.array([0.2])) == 1
    assert low_group_size(np.array([0.0, 0.0, 1.0, 1.0, 1.0])) == 2  # never splits a tie


def test_a_box_holds_the_samples_within_its_bounds_highest_loss_first(view: SampleView) -> None:
    rows = box_rows(view, (0.2, 0.6), (None, 0.1))
    inside = (view.confidence >= 0.2) & (view.confidence <= 0.6) & (view.variability <= 0.1)
    assert sorted(rows.tolist()) == np.flatnonzero(inside).tolist()
    assert np.all(np.diff(view.loss[rows]) <= 0)
    everything = box_rows(view, (None, None), (None, None))
    assert len(everything) == len(view)
    with pytest.raises(ConfigurationError, match=r"confidence range \[0.6, 0.2\] is empty"):
        box_rows(view, (0.6, 0.2), (None, None))


def test_a_box_criterion_describes_itself_and_names_its_selection(view: SampleView) -> None:
    criterion = Criterion("box", confidence=(0.0, 0.3), variability=(None, 0.2))
    rows, _ = choose(view, criterion)
    assert len(rows) > 0
    assert criterion.describe() == {
        "kind": "box",
        "confidence_min": 0.0,
        "confidence_max": 0.3,
        "variability_min": None,
        "variability_max": 0.2,
    }
    assert criterion.default_name() == "box-c0-0.3-vopen-0.2"


def test_regions_and_boxes_need_training_dynamics() -> None:
    scan = make_view(source="scan")
    for criterion in (
        Criterion("region", region="mislabeled"),
        Criterion("box", confidence=(0.0, 0.5)),
    ):
        with pytest.raises(ConfigurationError, match="training dynamics"):
            choose(scan, criterion)


# ------------------------------------------------------------------ planted label noise


def _training_view(epochs: int) -> tuple[SampleView, noisy_digits.NoisyDigits, float, float]:
    """Train on noisy digits, folding every batch into real training statistics.

    Returns the data map's view, the data, the final training accuracy on the noisy labels
    and the precision of ranking by the latest loss (what memorisation defeats).
    """
    torch.set_num_threads(1)
    data = noisy_digits.make()
    model = noisy_digits.make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=noisy_digits.LR)
    store, generator = SampleStore(), torch.Generator().manual_seed(0)
    n, step = len(data.train_y), 0
    for epoch in range(epochs):
        for ids in torch.randperm(n, generator=generator).split(64):
            logits = model(data.train_x[ids])
            losses = F.cross_entropy(logits, data.train_y[ids], reduction="none")
            optimizer.zero_grad()
            losses.mean().backward()
            optimizer.step()
            step += 1
            correct = (logits.argmax(1) == data.train_y[ids]).float().numpy()
            store.training.update(
                Chunk(
                    ids.numpy(),
                    losses.detach().numpy(),
                    correct,
                    data.train_y[ids].double().numpy(),
                    np.full(len(ids), step),
                    np.full(len(ids), epoch),
                )
            )
    view = store.view("train", "training")
    with torch.no_grad():
        accuracy = float((model(data.train_x).argmax(1) == data.train_y).float().mean())
    k = len(data.flipped)
    by_loss, _ = choose(view, Criterion("top", k=k))
    return view, data, accuracy, noisy_digits.precision(view.ids[by_loss], data)


@pytest.fixture(scope="module", params=[noisy_digits.SHORT_EPOCHS, noisy_digits.LONG_EPOCHS])
def noisy_training(request: pytest.FixtureRequest) -> tuple[int, tuple[object, ...]]:
    pytest.importorskip("sklearn")
    return request.param, _training_view(request.param)


def test_long_training_memorises_the_noise(noisy_training: tuple[int, tuple[object, ...]]) -> None:
    """The premise: after long training the latest loss no longer finds the flipped labels."""
    epochs, (_, _, accuracy, loss_precision) = noisy_training
    if epochs == noisy_digits.LONG_EPOCHS:
        assert accuracy > 0.98  # the flipped labels are fitted too
        assert loss_precision < 0.8
    else:
        assert loss_precision > 0.9


def test_likely_mislabeled_finds_the_flipped_labels_before_and_after_memorisation(
    noisy_training: tuple[int, tuple[object, ...]],
) -> None:
    _, (view, data, _, _) = noisy_training
    assert isinstance(view, SampleView) and isinstance(data, noisy_digits.NoisyDigits)
    k = len(data.flipped)
    for with_correctness in (False, True):
        ranked = region_rows(view, "mislabeled", size=k, with_correctness=with_correctness)
        assert noisy_digits.precision(view.ids[ranked], data) >= 0.9
    estimated = region_rows(view, "mislabeled")  # its own estimate of how many
    assert 0.5 * k <= len(estimated) <= 2 * k
    assert noisy_digits.recall(view.ids[estimated], data) >= 0.85


def test_the_hard_region_keeps_the_memorised_mislabels(
    noisy_training: tuple[int, tuple[object, ...]],
) -> None:
    _, (view, data, _, _) = noisy_training
    assert isinstance(view, SampleView) and isinstance(data, noisy_digits.NoisyDigits)
    hard = view.ids[region_rows(view, "hard")]
    assert noisy_digits.recall(hard, data) >= 0.95
    easy = view.ids[region_rows(view, "easy")]
    assert noisy_digits.precision(easy, data) < 0.01
