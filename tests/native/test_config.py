"""Argument checks that are not covered through the Trainer."""

from __future__ import annotations

import pytest

from onthefly.native.config import check_limits, rank_and_world_size, session_enabled


def test_limits_are_normalised() -> None:
    assert check_limits(3, None) == (3, -1)
    assert check_limits(-1, 10) == (None, 10)


@pytest.mark.parametrize(("value", "enabled"), [("0", False), ("off", False), ("1", True)])
def test_session_defaults_follow_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, enabled: bool
) -> None:
    monkeypatch.setenv("ONTHEFLY_SESSION", value)
    assert session_enabled(None) is enabled
    assert session_enabled(True) is True


def test_single_process_rank() -> None:
    assert rank_and_world_size() == (0, 1)
