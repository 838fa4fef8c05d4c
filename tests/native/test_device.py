"""Device choice and moving batches."""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

from onthefly.errors import ConfigurationError
from onthefly.native.device import resolve_device, to_device


def test_resolve_device() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available() and not torch.backends.mps.is_available():
        assert resolve_device(None) == torch.device("cpu")
    with pytest.raises(ConfigurationError, match="'cuda', 'cuda:1' or 'mps'"):
        resolve_device("gpu please")


def test_to_device_keeps_structure_and_does_not_copy_in_place() -> None:
    Pair = namedtuple("Pair", "a b")
    t = torch.ones(2)
    batch = {"x": [t, (t, "s")], "p": Pair(t, 3)}
    moved = to_device(batch, torch.device("cpu"))
    assert moved["x"][0] is t and moved["x"][1][1] == "s"
    assert isinstance(moved["p"], Pair) and moved["p"].a is t and moved["p"].b == 3
