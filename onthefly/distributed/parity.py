"""Do the ranks hold the same model? Digests of every tensor's bytes, compared across ranks.

Each rank digests (BLAKE2b, 16 bytes) the raw bytes, dtype and shape of every parameter and
buffer of its module and of every tensor in its optimizers' state (keyed by the parameter's
name), plus its optimizers' hyperparameters. Rank 0 compares the digests: for each tensor
the value most ranks agree on (rank 0's on a tie) is the reference, and every rank that
holds something else — or lacks the tensor — is named with the tensor.

Digesting copies each tensor to the host once: about a second per GB, on demand only.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

Digests = dict[str, str]
"""Tensor name -> hex digest."""

KINDS = ("parameter", "buffer", "optimizer state")


def tensor_digest(tensor: torch.Tensor) -> str:
    """A digest of ``tensor``'s dtype, shape and bytes (equal digests: bit-identical).

    Example:
        >>> tensor_digest(torch.zeros(2)) == tensor_digest(torch.zeros(2))
        True
        >>> tensor_digest(torch.zeros(2)) == tensor_digest(torch.zeros(2, dtype=torch.float64))
        False
    """
    value = tensor.detach()
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{value.dtype}{tuple(value.shape)}".encode())
    if value.numel():
        host = value.to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()
        digest.update(host.data)
    return digest.hexdigest()


def _value_digest(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return tensor_digest(value)
    return hashlib.blake2b(repr(value).encode(), digest_size=16).hexdigest()


def model_digests(module: nn.Module) -> dict[str, Digests]:
    """``{"parameter": {...}, "buffer": {...}}``: the digest of each named tensor."""
    return {
        "parameter": {name: tensor_digest(p) for name, p in module.named_parameters()},
        "buffer": {name: tensor_digest(b) for name, b in module.named_buffers()},
    }


def optimizer_digests(optimizers: Iterable[torch.optim.Optimizer], module: nn.Module) -> Digests:
    """The digest of each optimizer state entry (``opt0.exp_avg[net.weight]``) and of each
    param group's hyperparameters (``opt0.group0``)."""
    names = {id(p): name for name, p in module.named_parameters()}
    found: Digests = {}
    for o, optimizer in enumerate(optimizers):
        for g, group in enumerate(optimizer.param_groups):
            settings = {k: v for k, v in sorted(group.items()) if k != "params"}
            found[f"opt{o}.group{g}"] = _value_digest(settings)
            for param in group["params"]:
                name = names.get(id(param), f"param@{g}")
                for key, value in optimizer.state.get(param, {}).items():
                    found[f"opt{o}.{key}[{name}]"] = _value_digest(value)
    return found


def mismatches(per_rank: list[Digests]) -> dict[int, list[str]]:
    """For each rank that differs from the reference, the names it differs in.

    The reference of a name is the digest most ranks hold (rank 0's on a tie); a rank that
    lacks the name differs too.

    Example:
        >>> mismatches([{"w": "a", "b": "x"}, {"w": "a", "b": "y"}, {"w": "c", "b": "x"}])
        {1: ['b'], 2: ['w']}
    """
    names = sorted({name for digests in per_rank for name in digests})
    found: dict[int, list[str]] = {}
    for name in names:
        held = [digests.get(name) for digests in per_rank]
        counts = Counter(held)
        top = max(counts.values())
        reference = held[0] if counts[held[0]] == top else counts.most_common(1)[0][0]
        for rank, digest in enumerate(held):
            if digest != reference or digest is None:
                found.setdefault(rank, []).append(name)
    return found
