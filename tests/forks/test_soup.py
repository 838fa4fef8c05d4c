"""Soups: exact means, BatchNorm recomputed as update_bn does, greedy selection by score."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator

import pytest
import torch
from torch import nn
from torch.optim.swa_utils import update_bn

from onthefly.errors import ConfigurationError
from onthefly.forks.soup import average, greedy_soup, recompute_bn, uniform_soup
from tests.forks import synthetic


def _model(seed: int) -> nn.Module:
    """Random weights and BatchNorm statistics, a distinct ``num_batches_tracked``."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    with torch.no_grad():
        model[1].running_mean.normal_()
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].weight.normal_()
        model[1].num_batches_tracked.fill_(10 + seed)
    return model


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _batches(count: int = 5, size: int = 8) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return [torch.randn(size, 3, generator=generator) * 2 + 1 for _ in range(count)]


def test_average_is_the_exact_mean_of_float_tensors() -> None:
    models = [_model(seed) for seed in range(3)]
    before = [_state(m) for m in models]
    soup = average(models)
    for name, value in soup.state_dict().items():
        if name.endswith("num_batches_tracked"):
            assert value.item() == 10  # models[0]'s, not a mean
        else:
            expected = torch.stack([s[name] for s in before]).mean(0)
            torch.testing.assert_close(value, expected, rtol=0, atol=1e-7)
    for model, state in zip(models, before, strict=True):  # inputs untouched
        for name, value in model.state_dict().items():
            assert torch.equal(value, state[name])
    assert soup is not models[0] and soup[0].weight is not models[0][0].weight


def test_average_with_weights_need_not_sum_to_one() -> None:
    a, b = _model(0), _model(1)
    soup = average([a, b], weights=[3, 1])
    expected = (3 * a[0].weight + b[0].weight) / 4
    torch.testing.assert_close(soup[0].weight, expected, rtol=0, atol=1e-7)
    only_b = average([a, b], weights=[0, 2])
    assert torch.equal(only_b[1].running_var, b[1].running_var)


def test_average_keeps_dtypes_ties_and_clears_gradients() -> None:
    class Tied(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Linear(2, 2)
            self.b.weight = self.a.weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(x))

    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        model = Tied().to(torch.float64)
        model(torch.ones(1, 2, dtype=torch.float64)).sum().backward()
        models.append(model)
    soup = average(models)
    assert soup.a.weight is soup.b.weight
    assert soup.a.weight.dtype == torch.float64
    assert all(p.grad is None for p in soup.parameters())
    torch.testing.assert_close(soup.a.weight, (models[0].a.weight + models[1].a.weight) / 2)


def _other(width: int = 5) -> nn.Module:
    return nn.Sequential(nn.Linear(3, width))


@pytest.mark.parametrize(
    ("build", "weights", "message"),
    [
        (lambda: [], None, "non-empty"),
        (lambda: [_model(0), _other()], None, "'0.weight' is [5, 3] float32"),
        (lambda: [_model(0), _other(4)], None, "has no tensor '1.weight'"),
        (lambda: [_model(0), _model(1).double()], None, "float64, expected [4, 3] float32"),
        (lambda: [_model(0), _model(1)], [1.0], "1 weights for 2 models"),
        (lambda: [_model(0), _model(1)], [1.0, -1.0], "non-negative"),
        (lambda: [_model(0), _model(1)], [0.0, 0.0], "positive sum"),
        (lambda: [_model(0), _model(1)], [1.0, math.nan], "non-negative"),
    ],
)
def test_average_rejects_bad_input(
    build: Callable[[], list[nn.Module]], weights: list[float] | None, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[")):
        average(build(), weights)


def test_average_names_a_tensor_only_the_other_model_has() -> None:
    bigger = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    bigger.register_buffer("extra", torch.zeros(1))
    with pytest.raises(ConfigurationError, match="'extra' that models\\[0\\] lacks"):
        average([_model(0), bigger])


def test_recompute_bn_equals_update_bn() -> None:
    ours, theirs = _model(0), _model(0)
    batches = _batches()
    assert recompute_bn(ours, batches, forward=lambda model, x: model(x))
    update_bn(batches, theirs)
    for name, value in theirs.state_dict().items():
        assert torch.equal(ours.state_dict()[name], value), name
    assert ours[1].momentum == 0.1  # put back


def test_recompute_bn_default_forward_takes_the_input_of_a_tuple_and_max_batches() -> None:
    ours, theirs = _model(0), _model(0)
    batches = [(x, torch.zeros(len(x))) for x in _batches()]
    recompute_bn(ours, batches, max_batches=2)
    update_bn(batches[:2], theirs)
    assert torch.equal(ours[1].running_mean, theirs[1].running_mean)
    assert torch.equal(ours[1].running_var, theirs[1].running_var)


def test_recompute_bn_with_a_custom_forward_restores_every_module_mode() -> None:
    model = _model(0)
    model.eval()
    model[3].train()  # a deliberately mixed state
    seen: list[bool] = []

    def forward(m: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        seen.append(m[1].training)
        return m(batch["features"])

    before = model[1].running_mean.clone()
    recompute_bn(model, [{"features": x} for x in _batches()], forward)
    assert seen == [True] * 5  # statistics are gathered in train mode
    assert [m.training for m in model.modules()] == [False, False, False, False, True]
    assert not torch.equal(model[1].running_mean, before)


def test_recompute_bn_without_batchnorm_does_nothing() -> None:
    model = nn.Sequential(nn.Linear(3, 2))
    batches: Iterator[torch.Tensor] = iter(_batches())
    assert recompute_bn(model, batches) is False
    assert len(list(batches)) == 5  # no batch drawn


def test_recompute_bn_refuses_no_batches_and_keeps_the_statistics() -> None:
    model = _model(0)
    before = _state(model)
    with pytest.raises(ConfigurationError, match="no batch"):
        recompute_bn(model, [])
    with pytest.raises(ConfigurationError, match="max_batches"):
        recompute_bn(model, _batches(), max_batches=0)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_uniform_soup_is_the_average_then_update_bn() -> None:
    models = [_model(seed) for seed in range(3)]
    plain = uniform_soup(models)
    expected = average(models)
    assert all(torch.equal(v, expected.state_dict()[k]) for k, v in plain.state_dict().items())
    soup = uniform_soup(models, bn_batches=_batches())
    update_bn(_batches(), expected)
    assert all(torch.equal(v, expected.state_dict()[k]) for k, v in soup.state_dict().items())


def _scalar(value: float) -> nn.Module:
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(value)
    return model


def test_greedy_soup_keeps_only_ingredients_that_improve_the_score() -> None:
    # Own scores (w - 1.5)^2: 2.25, 0.25, 6.25, 0.25 -> visited 1, 3, 0, 2.
    # {1}: 0.25; +3 -> w 1.5, 0 (kept); +0 -> w 1, 0.25 (no); +2 -> w 7/3, 0.69 (no).
    models = [_scalar(w) for w in (0.0, 1.0, 4.0, 2.0)]
    calls: list[float] = []

    def score(model: nn.Module) -> float:
        calls.append(model.weight.item())
        return (model.weight.item() - 1.5) ** 2

    soup, kept = greedy_soup(models, score)
    assert kept == [1, 3]
    assert soup.weight.item() == 1.5
    assert len(calls) == 2 * len(models) - 1
    assert [m.weight.item() for m in models] == [0.0, 1.0, 4.0, 2.0]


def test_greedy_soup_never_keeps_on_a_tie_or_nan() -> None:
    models = [_scalar(w) for w in (1.0, 3.0, 5.0)]
    scores = {1.0: 1.0, 3.0: 2.0, 2.0: 1.0, 5.0: math.nan}
    soup, kept = greedy_soup(models, lambda m: scores.get(m.weight.item(), math.nan))
    assert kept == [0]  # the soup of 1 and 3 only ties; 5 scores NaN
    assert soup.weight.item() == 1.0 and soup is not models[0]


def test_greedy_soup_recomputes_batchnorm_for_each_candidate_from_a_one_shot_iterator() -> None:
    models = [_model(seed) for seed in range(3)]
    scored: list[torch.Tensor] = []

    def score(model: nn.Module) -> float:
        scored.append(model[1].running_mean.clone())
        return -float(len(scored))  # each call better than the last: every model is kept

    soup, kept = greedy_soup(models, score, bn_batches=iter(_batches()))
    assert kept == [2, 1, 0]  # own scores -1, -2, -3: the last scored first
    expected = uniform_soup(models, bn_batches=_batches())
    torch.testing.assert_close(soup[1].running_mean, expected[1].running_mean)
    torch.testing.assert_close(scored[-1], expected[1].running_mean)


def test_greedy_soup_rejects_a_score_that_is_not_a_number() -> None:
    with pytest.raises(ConfigurationError, match="expected a number"):
        greedy_soup([_scalar(1.0)], lambda m: "low")  # type: ignore[arg-type,return-value]


def test_uniform_soup_of_parent_and_specialist_helps_the_hard_slice() -> None:
    task = synthetic.make_task()
    parent, specialist = synthetic.parent_and_specialist()
    hard = task.hard_val_idx
    parent_hard = synthetic.loss_on(parent, task.val, hard)
    parent_val = synthetic.loss_on(parent, task.val)
    assert synthetic.loss_on(specialist, task.val, hard) < parent_hard
    soup = uniform_soup([parent, specialist], synthetic.batches(task.train), synthetic.logits)
    assert synthetic.loss_on(soup, task.val, hard) < parent_hard
    assert synthetic.loss_on(soup, task.val) <= synthetic.tolerated(parent_val)


def test_greedy_soup_scored_on_validation_keeps_the_parent_alone() -> None:
    # Parent + specialist scores worse on the full validation set than the parent: rejected.
    task = synthetic.make_task()
    parent, specialist = synthetic.parent_and_specialist()
    soup, kept = greedy_soup(
        [copy.deepcopy(specialist), parent],
        lambda m: synthetic.loss_on(m, task.val),
        synthetic.batches(task.train),
        synthetic.logits,
    )
    assert kept == [1]
    assert synthetic.loss_on(soup, task.val) == synthetic.loss_on(parent, task.val)
