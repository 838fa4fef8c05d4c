"""Where the run computes: picking the device and moving batches onto it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from onthefly.errors import ConfigurationError


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The device to train on: the one given, else CUDA, else MPS, else CPU.

    Raises:
        ConfigurationError: when ``device`` is not a valid device string.
    """
    if device is not None:
        try:
            return torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ConfigurationError(
                f"device={device!r} is not a device; expected e.g. 'cpu', 'cuda', 'cuda:1' or 'mps'"
            ) from exc
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def to_device(batch: Any, device: torch.device) -> Any:
    """Move every tensor in a (nested) tuple, list or dict batch to ``device``.

    Other leaves are returned as they are; a tensor already there is returned itself (no copy).
    """
    kind = type(batch)
    if kind is tuple or kind is list:  # the usual (x, y) batch, first and without ABC checks
        # Tensors already in place are kept inline: no call per item for a CPU run.
        return kind(
            [
                v if type(v) is torch.Tensor and v.device == device else to_device(v, device)
                for v in batch
            ]
        )
    if isinstance(batch, torch.Tensor):
        return batch if batch.device == device else batch.to(device)
    if isinstance(batch, Mapping):
        return type(batch)({k: to_device(v, device) for k, v in batch.items()})  # type: ignore[call-arg]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(to_device(v, device) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(to_device(v, device) for v in batch)
    return batch
