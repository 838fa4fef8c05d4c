"""Precision strings, the re-enterable autocast, and the pass-through scaler."""

from __future__ import annotations

import pytest
import torch

from onthefly.errors import ConfigurationError
from onthefly.native.precision import make_autocast, make_scaler, parse_precision

CPU = torch.device("cpu")


def test_parse_precision() -> None:
    assert parse_precision(32) == "32"
    assert parse_precision("bf16-mixed") == "bf16-mixed"
    with pytest.raises(ConfigurationError, match="expected one of 32, bf16-mixed, 16-mixed"):
        parse_precision("fp8")


def test_autocast_is_a_no_op_at_full_precision() -> None:
    autocast = make_autocast("32", CPU)
    with autocast:
        assert not torch.is_autocast_enabled("cpu")
    assert not autocast.enabled


def test_autocast_can_be_nested_and_reentered() -> None:
    autocast = make_autocast("bf16-mixed", CPU)
    a, b = torch.ones(2, 2), torch.ones(2, 2)
    for _ in range(2):
        with autocast:
            with autocast:
                assert (a @ b).dtype == torch.bfloat16
            assert (a @ b).dtype == torch.bfloat16
        assert (a @ b).dtype == torch.float32


def test_scaler_passes_through_on_cpu_even_at_16_mixed() -> None:
    scaler = make_scaler("16-mixed", CPU)
    weight = torch.ones(1, requires_grad=True)
    optimizer = torch.optim.SGD([weight], lr=1.0)
    loss = (weight * 3).sum()
    assert scaler.scale(loss) is loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert weight.item() == -2.0
