"""Rank 0's model and optimizer state copied to every rank, in place.

When rank 0 changes the model outside a training step (a merge loads merged weights, a
discarded merge puts the old ones back), the other ranks must hold the same values before
training goes on: DDP assumes identical replicas and never checks. These functions are
collectives over the control group (every rank calls them at the same point):

* :func:`broadcast_module` — every parameter and buffer (non-persistent buffers too) of rank
  0's module, copied into each rank's own tensors: the parameters stay the same objects, so
  DDP, the optimizer and any other reference keep working;
* :func:`broadcast_optimizer` — rank 0's optimizer state (moments, step counts, param groups),
  loaded into each rank's optimizer.

The tensors travel as raw bytes in buckets of at most :data:`BUCKET_BYTES` over the control
group (gloo, CPU memory): with NCCL the model lives on the GPU, so each bucket is copied to the
host on rank 0 and back to the device on the others — simple, bounded in host memory, with
OnTheFly's timeout, and it needs no collective of the training's own process group.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from lightning.fabric.utilities.apply_func import apply_to_collection
from torch import nn

from onthefly.distributed.group import ControlGroup

BUCKET_BYTES = 64 << 20
"""Most bytes sent in one broadcast (rank 0 holds one bucket's host copy at a time)."""


@dataclass(frozen=True)
class _Slot:
    """Where a tensor of rank 0's optimizer state goes, and what it is."""

    index: int
    shape: tuple[int, ...]
    dtype: torch.dtype


def module_tensors(module: nn.Module) -> list[torch.Tensor]:
    """Every parameter and buffer of ``module`` (tied ones once), in a fixed order."""
    return [p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()]


def broadcast_module(group: ControlGroup, module: nn.Module) -> int:
    """Copy rank 0's parameters and buffers into every rank's ``module``, in place.

    Args:
        group: the control group.
        module: this rank's plain module (the same architecture on every rank).

    Returns:
        The bytes sent.

    Raises:
        DistributedError: another rank died or hung.
    """
    return broadcast_into(group, module_tensors(module), "broadcast of the model's tensors")


def broadcast_optimizer(group: ControlGroup, optimizer: torch.optim.Optimizer) -> int:
    """Load rank 0's optimizer state into every rank's ``optimizer``.

    Args:
        group: the control group.
        optimizer: this rank's optimizer (over the same parameters as rank 0's).

    Returns:
        The bytes of tensors sent.

    Raises:
        DistributedError: another rank died or hung.
    """
    tensors: list[torch.Tensor] = []
    skeleton = None
    if group.is_zero:

        def slot(tensor: torch.Tensor) -> _Slot:
            tensors.append(tensor)
            return _Slot(len(tensors) - 1, tuple(tensor.shape), tensor.dtype)

        skeleton = apply_to_collection(optimizer.state_dict(), torch.Tensor, slot)
    skeleton = group.broadcast_objects([skeleton], "broadcast of the optimizer's layout")[0]
    if not group.is_zero:
        slots: list[_Slot] = []
        apply_to_collection(skeleton, _Slot, slots.append)
        tensors = [torch.empty(s.shape, dtype=s.dtype) for s in sorted(slots, key=_index)]
    sent = broadcast_into(group, tensors, "broadcast of the optimizer's state")
    if not group.is_zero:
        optimizer.load_state_dict(apply_to_collection(skeleton, _Slot, lambda s: tensors[s.index]))
    return sent


def _index(slot: _Slot) -> int:
    return slot.index


def broadcast_into(group: ControlGroup, tensors: Sequence[torch.Tensor], what: str) -> int:
    """Copy rank 0's values of ``tensors`` into every rank's (same shapes and dtypes
    everywhere), bucket by bucket; returns the bytes sent."""
    sent = 0
    for bucket in _buckets(tensors):
        size = sum(_nbytes(t) for t in bucket)
        if group.is_zero:
            flat = torch.cat([_as_bytes(t) for t in bucket])
        else:
            flat = torch.empty(size, dtype=torch.uint8)
        group.broadcast_tensor(flat, what)
        if not group.is_zero:
            _scatter(flat, bucket)
        sent += size
    return sent


def _buckets(tensors: Sequence[torch.Tensor]) -> Iterator[list[torch.Tensor]]:
    bucket: list[torch.Tensor] = []
    size = 0
    for tensor in tensors:
        n = _nbytes(tensor)
        if n == 0:
            continue
        if bucket and size + n > BUCKET_BYTES:
            yield bucket
            bucket, size = [], 0
        bucket.append(tensor)
        size += n
    if bucket:
        yield bucket


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)


@torch.no_grad()
def _scatter(flat: torch.Tensor, bucket: list[torch.Tensor]) -> None:
    offset = 0
    for tensor in bucket:
        n = _nbytes(tensor)
        # A copy of the slice starts at offset 0: viewing bytes as a wider dtype needs that.
        value: Any = flat[offset : offset + n].clone().view(tensor.dtype).view(tensor.shape)
        tensor.copy_(value)
        offset += n
