"""Rank 0's model and optimizer state copied into another rank's, with a recorded stand-in
for the control group (rank 0's broadcasts are replayed to the other rank)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from onthefly.distributed import replicate
from onthefly.distributed.replicate import broadcast_module, broadcast_optimizer


class Wire:
    """What rank 0 sent, in order."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []
        self.objects: list[list[Any]] = []


class Group:
    """Rank 0 records into ``wire``; rank 1 receives from it."""

    def __init__(self, rank: int, wire: Wire) -> None:
        self.rank, self.is_zero, self.wire = rank, rank == 0, wire

    def broadcast_tensor(self, tensor: torch.Tensor, what: str) -> torch.Tensor:
        assert tensor.device.type == "cpu" and tensor.dtype == torch.uint8
        if self.is_zero:
            self.wire.tensors.append(tensor.clone())
        else:
            tensor.copy_(self.wire.tensors.pop(0))
        return tensor

    def broadcast_objects(self, objects: list[Any], what: str) -> list[Any]:
        if self.is_zero:
            self.wire.objects.append(list(objects))
        else:
            objects[:] = self.wire.objects.pop(0)
        return objects


class Odd(nn.Module):
    """Tensors of several dtypes and sizes: bytes of one land at odd offsets of a bucket."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 5)
        self.norm = nn.BatchNorm1d(5)
        self.wide = nn.Parameter(torch.randn(3, dtype=torch.float64))
        self.register_buffer("mask", torch.rand(7) > 0.5)
        self.register_buffer("scratch", torch.randn(2), persistent=False)


def _pair() -> tuple[Odd, Odd]:
    torch.manual_seed(0)
    zero = Odd()
    zero.norm(torch.randn(8, 5))  # running statistics of its own
    torch.manual_seed(1)
    other = Odd()
    return zero, other


@pytest.mark.parametrize("bucket_bytes", [1 << 20, 24])
def test_every_parameter_and_buffer_is_copied_in_place(
    bucket_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replicate, "BUCKET_BYTES", bucket_bytes)
    zero, other = _pair()
    wire = Wire()
    objects = [id(t) for t in replicate.module_tensors(other)]
    sent = broadcast_module(Group(0, wire), zero)  # type: ignore[arg-type]
    assert broadcast_module(Group(1, wire), other) == sent  # type: ignore[arg-type]
    assert wire.tensors == []  # every bucket sent was received
    assert sent == sum(t.numel() * t.element_size() for t in replicate.module_tensors(zero))
    assert [id(t) for t in replicate.module_tensors(other)] == objects  # the same tensors
    for (name, mine), (_, theirs) in zip(
        [*other.named_parameters(), *other.named_buffers()],
        [*zero.named_parameters(), *zero.named_buffers()],
        strict=True,
    ):
        assert mine.dtype == theirs.dtype and torch.equal(mine, theirs), name


def test_rank_0s_optimizer_state_is_loaded_on_the_other_rank() -> None:
    zero, other = _pair()
    mine = torch.optim.Adam(zero.parameters(), lr=0.01)
    theirs = torch.optim.Adam(other.parameters(), lr=0.5)
    zero.lin(torch.randn(4, 3)).sum().backward()
    mine.step()
    wire = Wire()
    broadcast_optimizer(Group(0, wire), mine)  # type: ignore[arg-type]
    broadcast_optimizer(Group(1, wire), theirs)  # type: ignore[arg-type]
    assert wire.tensors == [] and wire.objects == []
    expected, got = mine.state_dict(), theirs.state_dict()
    assert got["param_groups"] == expected["param_groups"]  # lr 0.01 there too
    assert sorted(got["state"]) == sorted(expected["state"]) and got["state"]
    for key, state in expected["state"].items():
        for name, value in state.items():
            assert torch.equal(got["state"][key][name], value), (key, name)
