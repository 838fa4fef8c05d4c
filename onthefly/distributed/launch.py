"""The native trainer under ``torchrun``: the process group, the device and the model wrapper.

``onthefly.Trainer`` joins the job a launcher describes in the environment (``torchrun``
sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``): when
``WORLD_SIZE`` is over 1 and no default process group exists yet, it initialises one with
the backend that suits the device (``nccl`` on CUDA, ``gloo`` otherwise) and the timeout of
``ONTHEFLY_DIST_TIMEOUT``, and destroys it when the process exits (as Lightning does). A
group the script initialised itself is used as it is. On CUDA, a device given without an
index becomes ``cuda:LOCAL_RANK``.
"""

from __future__ import annotations

import atexit
import datetime
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from onthefly.distributed.group import timeout_s
from onthefly.errors import ConfigurationError


def launched_world_size() -> int:
    """``WORLD_SIZE`` as a launcher set it (1 when unset)."""
    raw = os.environ.get("WORLD_SIZE", "1").strip() or "1"
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"WORLD_SIZE={raw!r}; expected a positive integer") from None


def backend_for(device: torch.device) -> str:
    """``"nccl"`` for CUDA devices when available, else ``"gloo"``."""
    if device.type == "cuda" and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def join_from_environment(device: torch.device) -> torch.device:
    """Join the launcher's process group if there is one to join; the device to train on.

    Args:
        device: the device asked for (``cuda`` without an index becomes ``cuda:LOCAL_RANK``).

    Returns:
        The device this rank trains on.

    Raises:
        ConfigurationError: the environment describes a job this process cannot join (the
            message names the missing variable or the backend's error).
    """
    if not dist.is_available():
        return device
    if not dist.is_initialized() and launched_world_size() > 1:
        missing = [v for v in ("RANK", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise ConfigurationError(
                f"WORLD_SIZE is over 1 but {', '.join(missing)} is not set; expected a job "
                "started by torchrun (or those variables set by another launcher)"
            )
        device = _rank_device(device)
        if device.type == "cuda":
            torch.cuda.set_device(device)
        dist.init_process_group(
            backend=backend_for(device),
            timeout=datetime.timedelta(seconds=timeout_s()),
        )
        # Not at the end of fit: the script may go on using the group (another fit, a test).
        # Left to the interpreter's teardown, gloo's threads can outlive it and abort the
        # process after the script ended ("terminate called without an active exception").
        atexit.register(_destroy_group)
        return device
    if dist.is_initialized() and dist.get_world_size() > 1:
        return _rank_device(device)
    return device


def _destroy_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _rank_device(device: torch.device) -> torch.device:
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def wrap_model(model: nn.Module, device: torch.device) -> tuple[nn.Module, nn.Module]:
    """``(plain module, module the steps call)`` for a distributed run.

    A model the user already wrapped in ``DistributedDataParallel`` is used as it is;
    otherwise it is wrapped with the defaults (gradients averaged over the ranks, buffers
    broadcast from rank 0 at each forward, rank 0's initial weights on every rank).

    Args:
        model: the user's model, already on ``device``.
        device: this rank's device.
    """
    if isinstance(model, DistributedDataParallel):
        return model.module, model
    device_ids = [device.index] if device.type == "cuda" and device.index is not None else None
    return model, DistributedDataParallel(model, device_ids=device_ids)


def unwrapped(model: nn.Module) -> nn.Module:
    """The module inside a ``DistributedDataParallel`` wrapper (``model`` itself otherwise)."""
    return model.module if isinstance(model, DistributedDataParallel) else model
