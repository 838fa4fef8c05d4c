"""Adapters: LoRA on every Linear, the rest frozen; stripping restores; folding is exact."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.errors import ConfigurationError
from onthefly.forks.adapters import (
    LoRALinear,
    adapter_deltas,
    add_adapters,
    fold_adapters,
    strip_adapters,
)
from tests.forks import synthetic


def _model(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(4, 8),
        nn.BatchNorm1d(8),
        nn.ReLU(),
        nn.Sequential(nn.Linear(8, 8), nn.ReLU()),
        nn.Linear(8, 2),
    )


def _train(model: nn.Module, params: list[nn.Parameter], steps: int = 20, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.SGD(params, lr=0.1)
    model.train()
    for _ in range(steps):
        x = torch.randn(16, 4, generator=generator)
        loss = F.cross_entropy(model(x), (x[:, 0] > x[:, 1]).long())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_lora_linear_starts_as_its_base_and_adds_the_scaled_low_rank_product() -> None:
    base = nn.Linear(6, 3)
    layer = LoRALinear(base, rank=2, alpha=4.0)
    x = torch.randn(5, 6)
    assert torch.equal(layer(x), base(x))  # B starts at zero
    assert layer.A.shape == (2, 6) and layer.B.shape == (3, 2) and layer.scale == 2.0
    assert not base.weight.requires_grad and layer.A.requires_grad and layer.B.requires_grad
    bound = 1 / 6**0.5  # kaiming_uniform(a=sqrt(5)), as nn.Linear initialises its weight
    assert bool((layer.A != 0).any()) and float(layer.A.detach().abs().max()) <= bound
    with torch.no_grad():
        layer.B.normal_()
    expected = base(x) + 2.0 * (x @ layer.A.T @ layer.B.T)
    torch.testing.assert_close(layer(x), expected)
    torch.testing.assert_close(layer.delta(), 2.0 * layer.B @ layer.A)
    assert LoRALinear(nn.Linear(6, 3), rank=2).scale == 1.0


def test_add_adapters_wraps_every_linear_and_freezes_the_rest() -> None:
    model = _model()
    params = add_adapters(model, rank=4)
    layers = [m for m in model.modules() if isinstance(m, LoRALinear)]
    assert len(layers) == 3 and isinstance(model[3][0], LoRALinear)
    assert params == [p for layer in layers for p in (layer.A, layer.B)]
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {id(p) for p in trainable} == {id(p) for p in params}
    # The 8 -> 2 layer is narrower than the rank: its adapter has rank 2, the same scale.
    assert model[4].A.shape == (2, 8) and model[4].scale == model[0].scale == 1.0
    assert model[1].momentum == 0.0


def test_training_adapters_changes_only_the_adapters() -> None:
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = add_adapters(model, rank=2, alpha=4.0)
    _train(model, params)
    after = strip_adapters(model).state_dict()
    assert set(after) == set(before)
    for name, value in before.items():
        if not name.endswith("num_batches_tracked"):
            assert torch.equal(after[name], value), name


def test_strip_adapters_puts_the_plain_layers_and_flags_back() -> None:
    model = _model()
    model[0].bias.requires_grad_(False)  # frozen by the user: stays frozen
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    add_adapters(model, rank=2)
    assert strip_adapters(model) is model
    assert [m for m in model.modules() if isinstance(m, nn.Linear)] == linears
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    flags = {name: p.requires_grad for name, p in model.named_parameters()}
    assert flags == {name: name != "0.bias" for name in flags}
    assert model[1].momentum == 0.1
    assert strip_adapters(model) is model  # no adapters: nothing to do
    add_adapters(model, rank=2)  # and they can go on again


def test_adapter_deltas_are_named_like_the_plain_model() -> None:
    model = _model()
    plain_keys = set(model.state_dict())
    params = add_adapters(model, rank=2, alpha=3.0)
    _train(model, params, steps=3)
    deltas = adapter_deltas(model)
    assert set(deltas) == {"0.weight", "3.0.weight", "4.weight"} <= plain_keys
    layer = model[3][0]
    torch.testing.assert_close(deltas["3.0.weight"], 1.5 * layer.B @ layer.A)
    assert not deltas["0.weight"].requires_grad


def test_folding_one_fork_with_weight_one_reproduces_it() -> None:
    parent = _model()
    _train(parent, list(parent.parameters()), steps=5, seed=1)  # real BatchNorm statistics
    fork = copy.deepcopy(parent)
    params = add_adapters(fork, rank=3)
    _train(fork, params, steps=30)
    folded = fold_adapters(parent, [adapter_deltas(fork)])
    x = torch.randn(64, 4)
    fork.eval(), folded.eval()
    with torch.no_grad():
        torch.testing.assert_close(folded(x), fork(x), rtol=1e-5, atol=1e-5)
        assert not torch.allclose(parent.eval()(x), fork(x), atol=1e-3)
    assert all(
        isinstance(m, nn.Linear | nn.BatchNorm1d | nn.ReLU | nn.Sequential)
        for m in folded.modules()
    )


def test_folding_several_forks_adds_their_weighted_deltas() -> None:
    parent = _model()
    deltas = []
    for seed in (1, 2):
        fork = copy.deepcopy(parent)
        _train(fork, add_adapters(fork, rank=2), steps=5, seed=seed)
        deltas.append(adapter_deltas(fork))
    folded = fold_adapters(parent, deltas, weights=[0.5, 2.0])
    for name, weight in parent.named_parameters():
        expected = weight.detach().clone()
        if name in deltas[0]:
            expected += 0.5 * deltas[0][name] + 2.0 * deltas[1][name]
        torch.testing.assert_close(dict(folded.named_parameters())[name], expected)
    default = fold_adapters(parent, deltas)  # weights 1: the plain sum
    torch.testing.assert_close(
        default[0].weight, parent[0].weight + deltas[0]["0.weight"] + deltas[1]["0.weight"]
    )
    assert torch.equal(parent[0].weight, _model()[0].weight)  # the base is untouched


@pytest.mark.parametrize(
    ("build", "rank", "message"),
    [
        (_model, 0, "positive integer"),
        (_model, True, "positive integer"),
        (_model, 9, r"exceeds .* \(largest: 8\); expected a rank <= 8"),
        (lambda: nn.Sequential(nn.Conv1d(2, 2, 1)), 1, "no nn.Linear layer"),
        (lambda: nn.Linear(4, 4), 1, "wrap it in a container"),
    ],
)
def test_add_adapters_rejects_bad_input(
    build: Callable[[], nn.Module], rank: int, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        add_adapters(build(), rank)


def test_add_adapters_twice_and_deltas_without_adapters_are_refused() -> None:
    model = _model()
    with pytest.raises(ConfigurationError, match="no adapters"):
        adapter_deltas(model)
    add_adapters(model, rank=2)
    with pytest.raises(ConfigurationError, match="already has adapters"):
        add_adapters(model, rank=2)


def test_fold_adapters_rejects_bad_input() -> None:
    fork = _model()
    add_adapters(fork, rank=2)
    deltas = adapter_deltas(fork)
    with pytest.raises(ConfigurationError, match="strip_adapters first"):
        fold_adapters(fork, [deltas])
    with pytest.raises(ConfigurationError, match=r"shape \[2, 4\]; expected .* \[8, 4\]"):
        fold_adapters(_model(), [{"0.weight": torch.zeros(2, 4)}])
    with pytest.raises(ConfigurationError, match="2 weights for 1 deltas"):
        fold_adapters(_model(), [deltas], weights=[1.0, 1.0])
    with pytest.raises(ConfigurationError, match="non-negative"):
        fold_adapters(_model(), [deltas], weights=[-1.0])
    with pytest.raises(ConfigurationError, match="non-empty"):
        fold_adapters(_model(), [])


def test_an_adapter_fork_folded_into_the_parent_helps_the_hard_slice() -> None:
    task = synthetic.make_task()
    parent, _ = synthetic.parent_and_specialist()
    fork = copy.deepcopy(parent)
    torch.manual_seed(0)  # the adapters' initialisation
    add_adapters(fork, rank=4)
    synthetic.train(fork, task.train, task.hard_train_idx, steps=20, lr=2e-3)
    merged = fold_adapters(parent, [adapter_deltas(fork)])
    hard = task.hard_val_idx
    assert synthetic.loss_on(merged, task.val, hard) < synthetic.loss_on(parent, task.val, hard)
    assert synthetic.loss_on(merged, task.val) <= synthetic.tolerated(
        synthetic.loss_on(parent, task.val)
    )
    assert synthetic.loss_on(merged, task.val, hard) == pytest.approx(
        synthetic.loss_on(fork, task.val, hard), rel=1e-5
    )
