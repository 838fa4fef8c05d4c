"""Joining a launcher's job (checked without starting a process group in this process)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from onthefly.distributed.launch import (
    backend_for,
    join_from_environment,
    launched_world_size,
    unwrapped,
)
from onthefly.errors import ConfigurationError


def test_a_single_process_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert launched_world_size() == 1
    cpu = torch.device("cpu")
    assert join_from_environment(cpu) is cpu
    assert not torch.distributed.is_initialized()


def test_an_incomplete_launch_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match="RANK, MASTER_ADDR, MASTER_PORT is not set"):
        join_from_environment(torch.device("cpu"))
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ConfigurationError, match="WORLD_SIZE='two'; expected a positive integer"):
        launched_world_size()
    assert not torch.distributed.is_initialized()


def test_the_backend_suits_the_device() -> None:
    assert backend_for(torch.device("cpu")) == "gloo"
    cuda = "nccl" if torch.distributed.is_nccl_available() else "gloo"
    assert backend_for(torch.device("cuda", 0)) == cuda


def test_a_plain_module_is_its_own_unwrapped_module() -> None:
    model = nn.Linear(2, 2)
    assert unwrapped(model) is model
