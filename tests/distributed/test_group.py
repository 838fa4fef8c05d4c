"""The control group's timeout and its errors (the collectives run in tests/distributed/run_*)."""

from __future__ import annotations

import pytest

from onthefly.distributed.group import (
    DEFAULT_TIMEOUT_S,
    failure,
    is_collective_failure,
    timeout_s,
)
from onthefly.errors import DistributedError


def test_the_timeout_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("ONTHEFLY_DIST_TIMEOUT", raising=False)
    assert timeout_s() == DEFAULT_TIMEOUT_S == 300
    monkeypatch.setenv("ONTHEFLY_DIST_TIMEOUT", "12.5")
    assert timeout_s() == 12.5
    for bad in ("-3", "soon", "0"):
        monkeypatch.setenv("ONTHEFLY_DIST_TIMEOUT", bad)
        assert timeout_s() == DEFAULT_TIMEOUT_S
    assert (
        "ONTHEFLY_DIST_TIMEOUT='soon' is ignored: expected a number of seconds > 0" in caplog.text
    )


def test_a_failed_collective_becomes_a_clear_error() -> None:
    gloo = RuntimeError(
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer\n"
        "more lines"
    )
    assert is_collective_failure(gloo)
    assert not is_collective_failure(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_collective_failure(ValueError("gloo"))
    error = failure(1, "control round after 2.0 s (timeout 5 s)", gloo)
    assert isinstance(error, DistributedError)
    assert str(error) == (
        "rank 1: the control round after 2.0 s (timeout 5 s) with the other ranks failed: "
        "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer. "
        "Another rank has probably died or hung; its own output says why"
    )
