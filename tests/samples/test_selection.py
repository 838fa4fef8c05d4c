"""Selections by each criterion, named and reusable."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pytest

from onthefly.errors import ConfigurationError
from onthefly.samples import clustering
from onthefly.samples.selection import Criterion, Selection, Selections, check_name, choose
from onthefly.samples.store import SampleView
from tests.samples.conftest import make_view


def test_top_k_takes_the_highest_losses_first(view: SampleView) -> None:
    rows, _ = choose(view, Criterion("top", k=3))
    assert view.ids[rows].tolist() == [198, 196, 194]


def test_a_loss_range_and_an_open_bound(view: SampleView) -> None:
    rows, _ = choose(view, Criterion("range", loss_min=1.0, loss_max=1.2))
    assert sorted(view.loss[rows].round(3).tolist()) == [1.0, 1.1, 1.2]
    rows, _ = choose(view, Criterion("range", loss_min=9.5))
    assert view.loss[rows].round(3).tolist() == [9.9, 9.8, 9.7, 9.6, 9.5]


def test_a_quantile_tail_holds_the_losses_at_or_above_it(view: SampleView) -> None:
    rows, extra = choose(view, Criterion("quantile", q=0.9))
    assert extra["threshold"] == pytest.approx(np.quantile(view.loss, 0.9))
    assert len(rows) == 10 and view.loss[rows].min() >= extra["threshold"]


def test_regions_need_training_dynamics() -> None:
    with pytest.raises(ConfigurationError, match="training dynamics"):
        choose(make_view(source="scan"), Criterion("region", region="easy"))


def test_clusters_are_numbered_by_decreasing_mean_loss(view: SampleView) -> None:
    pytest.importorskip("sklearn")
    rows, extra = choose(view, Criterion("cluster", k=3, cluster=0))
    means = [c["loss_mean"] for c in extra["clusters"]]
    assert means == sorted(means, reverse=True)
    assert sum(c["size"] for c in extra["clusters"]) == len(view)
    assert view.loss[rows].mean() == pytest.approx(means[0])


def test_clusters_without_scikit_learn_name_the_extra(
    view: SampleView, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_sklearn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("sklearn"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    with pytest.raises(clustering.MissingExtra, match=r"pip install onthefly-ai\[explorer\]"):
        choose(view, Criterion("cluster", k=2))


def test_selections_are_named_reusable_and_survive_their_state() -> None:
    selections = Selections()
    selections.add(
        Selection("hard", "train", "training", 3, {"kind": "top", "k": 2}, np.array([9, 4]))
    )
    assert selections.indices("hard") == [9, 4]
    restored = Selections()
    restored.load_state_dict(selections.state_dict())
    assert restored.indices("hard") == [9, 4]
    assert restored.summaries()[0]["size"] == 2
    with pytest.raises(
        ConfigurationError, match="no selection named 'easy'; expected one of: hard"
    ):
        restored.get("easy")


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".hidden", "x" * 65])
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid"):
        check_name(name)


def test_default_names_say_what_was_chosen() -> None:
    assert Criterion("top", k=100).default_name() == "top-100"
    assert Criterion("quantile", q=0.9).default_name() == "q0.9"
    assert Criterion("range", loss_max=2.0).default_name() == "loss-open-2"
    assert Criterion("cluster", k=4, cluster=1).default_name() == "cluster-1-of-4"
    for criterion in (Criterion("top", k=1), Criterion("range", loss_min=0.5)):
        check_name(criterion.default_name())
