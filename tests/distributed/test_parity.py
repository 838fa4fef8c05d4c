"""Digests of every tensor, and which rank differs in which."""

from __future__ import annotations

import torch
from torch import nn

from onthefly.distributed.parity import (
    mismatches,
    model_digests,
    optimizer_digests,
    tensor_digest,
)


def test_a_digest_changes_with_any_bit_dtype_or_shape() -> None:
    x = torch.arange(6, dtype=torch.float32)
    assert tensor_digest(x) == tensor_digest(x.clone())
    flipped = x.clone()
    flipped.view(torch.int32)[3] ^= 1  # the lowest bit of one element
    assert tensor_digest(flipped) != tensor_digest(x)
    assert tensor_digest(x.reshape(2, 3)) != tensor_digest(x)
    assert tensor_digest(x.double()) != tensor_digest(x)
    assert tensor_digest(torch.tensor(1.0)) != tensor_digest(torch.tensor(2.0))
    assert tensor_digest(x[::2]) == tensor_digest(x[::2].contiguous())


def _model_and_optimizer() -> tuple[nn.Sequential, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_every_parameter_buffer_and_optimizer_entry_is_named() -> None:
    model, optimizer = _model_and_optimizer()
    digests = model_digests(model)
    assert sorted(digests["parameter"]) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert sorted(digests["buffer"]) == ["1.num_batches_tracked", "1.running_mean", "1.running_var"]
    entries = optimizer_digests([optimizer], model)
    assert "opt0.exp_avg[0.weight]" in entries and "opt0.step[1.bias]" in entries
    assert "opt0.group0" in entries
    assert len(entries) == 1 + 4 * 3  # the group, and step / exp_avg / exp_avg_sq per parameter


def test_a_changed_hyperparameter_or_state_is_seen() -> None:
    model, optimizer = _model_and_optimizer()
    before = optimizer_digests([optimizer], model)
    optimizer.param_groups[0]["lr"] = 0.02
    optimizer.state[model[0].weight]["exp_avg"][0, 0] += 1
    after = optimizer_digests([optimizer], model)
    assert {k for k in before if before[k] != after[k]} == {"opt0.group0", "opt0.exp_avg[0.weight]"}


def test_the_rank_that_differs_from_most_is_named() -> None:
    same = {"a": "1", "b": "2"}
    assert mismatches([same, dict(same), dict(same)]) == {}
    assert mismatches([same, {"a": "1", "b": "X"}]) == {1: ["b"]}  # a tie: rank 0 is right
    assert mismatches([{"a": "X", "b": "2"}, same, same]) == {0: ["a"]}  # rank 0 is outvoted
    assert mismatches([same, {"a": "1"}]) == {1: ["b"]}  # a tensor missing on rank 1
