"""Fisher: per-sample squared gradients as a plain loop gives them, and the weighted merge."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.errors import ConfigurationError
from onthefly.forks.fisher import diagonal_fisher, fisher_merge
from onthefly.forks.soup import recompute_bn
from tests.forks import synthetic

Batch = tuple[torch.Tensor, torch.Tensor]


def _linear(weight: list[float], bias: float) -> nn.Linear:
    model = nn.Linear(len(weight), 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([weight]))
        model.bias.fill_(bias)
    return model


def test_fisher_merge_weights_each_parameter_by_its_fisher() -> None:
    a, b = _linear([1.0, 2.0], 10.0), _linear([3.0, 6.0], 20.0)
    fishers = [{"weight": torch.tensor([[1.0, 0.0]])}, {"weight": torch.tensor([[3.0, 0.0]])}]
    merged = fisher_merge([a, b], fishers)
    # (1*1 + 3*3) / 4 = 2.5; no Fisher anywhere -> the floor -> the mean (2 + 6) / 2 = 4;
    # the bias has no Fisher at all -> the plain mean.
    torch.testing.assert_close(merged.weight, torch.tensor([[2.5, 4.0]]), rtol=0, atol=1e-6)
    torch.testing.assert_close(merged.bias, torch.tensor([15.0]), rtol=0, atol=1e-6)
    assert a.weight.tolist() == [[1.0, 2.0]] and merged is not a


def test_fisher_merge_floor_clamps_small_fishers() -> None:
    a, b = _linear([0.0], 0.0), _linear([3.0], 0.0)
    fishers = [{"weight": torch.tensor([[0.5]])}, {"weight": torch.tensor([[2.0]])}]
    exact = fisher_merge([a, b], fishers, floor=0.0)
    torch.testing.assert_close(exact.weight, torch.tensor([[2.4]]))  # (0.5*0 + 2*3) / 2.5
    floored = fisher_merge([a, b], fishers, floor=1.0)
    torch.testing.assert_close(floored.weight, torch.tensor([[2.0]]))  # (1*0 + 2*3) / 3
    zero = [{"weight": torch.zeros(1, 1)}, {"weight": torch.zeros(1, 1)}]
    torch.testing.assert_close(fisher_merge([a, b], zero, floor=0.0).weight, torch.tensor([[1.5]]))


def test_fisher_merge_model_weights_scale_the_fishers_and_the_means() -> None:
    a, b = _linear([0.0], 0.0), _linear([4.0], 8.0)
    fishers = [{"weight": torch.tensor([[1.0]])}, {"weight": torch.tensor([[1.0]])}]
    merged = fisher_merge([a, b], fishers, weights=[1, 3])
    torch.testing.assert_close(merged.weight, torch.tensor([[3.0]]))  # (1*0 + 3*4) / 4
    torch.testing.assert_close(merged.bias, torch.tensor([6.0]))  # no Fisher: weighted mean


def test_fisher_merge_buffers_mean_and_integer_buffers_of_the_first_model() -> None:
    models = []
    for seed in range(2):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3))
        model[1].running_mean.normal_()
        model[1].num_batches_tracked.fill_(seed + 5)
        models.append(model)
    fishers = [{n: torch.ones_like(p) for n, p in m.named_parameters()} for m in models]
    merged = fisher_merge(models, fishers)
    expected = (models[0][1].running_mean + models[1][1].running_mean) / 2
    torch.testing.assert_close(merged[1].running_mean, expected)
    assert merged[1].num_batches_tracked.item() == 5
    torch.testing.assert_close(merged[0].weight, (models[0][0].weight + models[1][0].weight) / 2)


@pytest.mark.parametrize(
    ("fishers", "kwargs", "message"),
    [
        ([{"weight": torch.ones(1, 1)}], {}, "got 1 Fishers for 2 models"),
        ([{"weight": torch.ones(1, 1)}] * 2, {"floor": -1.0}, "floor must be"),
        ([{"weight": torch.ones(1, 1)}] * 2, {"floor": math.inf}, "floor must be"),
        ([{"weight": torch.ones(1, 1)}] * 2, {"weights": [1.0]}, "1 weights for 2"),
        ([{"nope": torch.ones(1, 1)}] * 2, {}, "'nope', which is not a parameter"),
        ([{"weight": torch.ones(2)}] * 2, {}, r"is \[2\]; expected .* shape \[1, 1\]"),
        ([{"weight": -torch.ones(1, 1)}] * 2, {}, "negative or non-finite"),
        ([{"weight": torch.full((1, 1), math.nan)}] * 2, {}, "negative or non-finite"),
        (
            [{"weight": torch.ones(1, 1)}, {"bias": torch.ones(1)}],
            {},
            "differ on 'bias'",
        ),
    ],
)
def test_fisher_merge_rejects_bad_input(
    fishers: list[dict[str, torch.Tensor]], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        fisher_merge([_linear([1.0], 0.0), _linear([2.0], 0.0)], fishers, **kwargs)


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.Tanh(), nn.Linear(5, 3))
    with torch.no_grad():
        model[1].running_mean.normal_()
    return model


def _data(count: int = 10) -> list[Batch]:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(count, 3, generator=generator)
    y = torch.randint(3, (count,), generator=generator)
    return [(x[:4], y[:4]), (x[4:], y[4:])]


def _sample_losses(model: nn.Module, batch: Batch) -> torch.Tensor:
    return F.cross_entropy(model(batch[0]), batch[1], reduction="none")


def _by_hand(model: nn.Module, batches: list[Batch]) -> dict[str, torch.Tensor]:
    """One sample at a time, in eval mode: the definition, spelled out."""
    model.eval()
    params = dict(model.named_parameters())
    total = {n: torch.zeros_like(p) for n, p in params.items()}
    count = 0
    for x, y in batches:
        for i in range(len(x)):
            loss = F.cross_entropy(model(x[i : i + 1]), y[i : i + 1])
            grads = torch.autograd.grad(loss, list(params.values()))
            for name, g in zip(params, grads, strict=True):
                total[name] += g**2
            count += 1
    model.train()
    return {n: t / count for n, t in total.items()}


@pytest.mark.parametrize("method", ["auto", "vmap", "loop"])
def test_diagonal_fisher_is_the_mean_squared_per_sample_gradient(method: str) -> None:
    model = _model()
    expected = _by_hand(_model(), _data())
    fisher = diagonal_fisher(model, _data(), _sample_losses, method=method)  # type: ignore[arg-type]
    assert set(fisher) == set(expected)
    for name, value in expected.items():
        torch.testing.assert_close(fisher[name], value, rtol=1e-5, atol=1e-7)


def test_diagonal_fisher_max_samples_cuts_the_last_batch() -> None:
    expected = _by_hand(_model(), [(x[:2], y[:2]) for x, y in _data()[:1]])
    again = _by_hand(_model(), _data()[:1])
    fisher = diagonal_fisher(_model(), _data(), _sample_losses, max_samples=2)
    for name, value in expected.items():
        torch.testing.assert_close(fisher[name], value, rtol=1e-5, atol=1e-7)
    assert not torch.allclose(fisher["0.weight"], again["0.weight"])


def test_diagonal_fisher_leaves_the_model_as_it_was() -> None:
    model = _model()
    model[0].bias.requires_grad_(False)
    model[3].eval()  # mixed modes come back as they were
    sentinel = torch.full_like(model[0].weight, 7.0)
    model[0].weight.grad = sentinel
    state = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():  # the caller's grad mode does not matter
        fisher = diagonal_fisher(model, _data(), _sample_losses)
    assert "0.bias" not in fisher and "0.weight" in fisher
    assert model[0].weight.grad is sentinel and bool((sentinel == 7.0).all())
    assert model[3].bias.grad is None
    assert [m.training for m in model.modules()] == [True, True, True, True, False]
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())
    assert not model[0].bias.requires_grad and model[0].weight.requires_grad


class _Unvmappable(nn.Module):
    """Reads a value back to Python inside forward: vmap cannot do that, a loop can."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = _model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        return out * 2.0 if float(x.abs().max()) > 0 else out


def test_diagonal_fisher_falls_back_to_a_loop_when_vmap_fails() -> None:
    model = _Unvmappable()
    loop = diagonal_fisher(model, _data(), _sample_losses, method="loop")
    auto = diagonal_fisher(model, _data(), _sample_losses)
    for name, value in loop.items():
        torch.testing.assert_close(auto[name], value)
    with pytest.raises(RuntimeError):
        diagonal_fisher(model, _data(), _sample_losses, method="vmap")


def test_diagonal_fisher_accepts_dict_batches() -> None:
    def loss_of(model: nn.Module, batch: dict[str, Any]) -> torch.Tensor:
        return F.cross_entropy(model(batch["x"]), batch["y"], reduction="none")

    batches = [{"x": x, "y": y, "name": "slice"} for x, y in _data()]
    fisher = diagonal_fisher(_model(), batches, loss_of)
    expected = diagonal_fisher(_model(), _data(), _sample_losses, method="loop")
    for name, value in expected.items():
        torch.testing.assert_close(fisher[name], value)


@pytest.mark.parametrize(
    ("batches", "loss_of", "kwargs", "message"),
    [
        (_data(), lambda m, b: _sample_losses(m, b).mean(), {}, r"returned \(\) .* shape \(4,\)"),
        ([], _sample_losses, {}, "no sample"),
        (_data(), _sample_losses, {"max_samples": 0}, "max_samples"),
        (_data(), _sample_losses, {"method": "fast"}, "method must be"),
    ],
)
def test_diagonal_fisher_rejects_bad_input(
    batches: list[Batch], loss_of: Any, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        diagonal_fisher(_model(), batches, loss_of, **kwargs)


def test_diagonal_fisher_needs_a_trainable_parameter() -> None:
    model = _model().requires_grad_(False)
    with pytest.raises(ConfigurationError, match="no trainable parameter"):
        diagonal_fisher(model, _data(), _sample_losses)


def test_fisher_merge_of_parent_and_specialist_helps_the_hard_slice() -> None:
    task = synthetic.make_task()
    parent, specialist = synthetic.parent_and_specialist()
    rest, hard = task.rest_train_idx, task.hard_train_idx
    fishers = [
        diagonal_fisher(parent, synthetic.batches(task.train, rest), synthetic.sample_losses),
        diagonal_fisher(specialist, synthetic.batches(task.train, hard), synthetic.sample_losses),
    ]
    merged = fisher_merge([parent, specialist], fishers, weights=[len(rest), len(hard)])
    recompute_bn(merged, synthetic.batches(task.train), synthetic.logits)
    parent_hard = synthetic.loss_on(parent, task.val, task.hard_val_idx)
    assert synthetic.loss_on(merged, task.val, task.hard_val_idx) < parent_hard
    parent_val = synthetic.loss_on(parent, task.val)
    assert synthetic.loss_on(merged, task.val) <= synthetic.tolerated(parent_val)
