"""CommandRegistry: routing, unknown commands, failing handlers (real PendingCommand)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from onthefly.commands.registry import Boundary, CommandRegistry
from onthefly.protocol import CLIENT_COMMAND
from onthefly.server import PendingCommand


def pending(kind: str, **fields: Any) -> tuple[PendingCommand, list[dict[str, Any]]]:
    frames: list[dict[str, Any]] = []

    def deliver(render: Callable[[], bytes]) -> None:
        frames.append(json.loads(render()))

    command = CLIENT_COMMAND.validate_python({"type": kind, "id": "c1", **fields})
    return PendingCommand(command, "main", deliver), frames


BOUNDARY = Boundary(trainer=None, module=None)


def test_dispatch_runs_the_registered_handler() -> None:
    registry = CommandRegistry()
    registry.register("pause", lambda boundary, cmd: cmd.relay({"state": "paused", "step": 3}))
    cmd, frames = pending("pause")
    registry.dispatch(BOUNDARY, cmd)
    assert frames == [{"type": "reply", "id": "c1", "data": {"state": "paused", "step": 3}}]


def test_a_command_without_handler_is_unsupported() -> None:
    cmd, frames = pending("test")
    CommandRegistry().dispatch(BOUNDARY, cmd)
    assert frames[0]["type"] == "error"
    assert frames[0]["error"]["code"] == "unsupported"
    assert "'test'" in frames[0]["error"]["message"]


def test_a_failing_handler_answers_internal_and_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = CommandRegistry()

    def broken(boundary: Boundary, cmd: PendingCommand) -> None:
        raise RuntimeError("boom")

    registry.register("stop", broken)
    cmd, frames = pending("stop")
    registry.dispatch(BOUNDARY, cmd)
    assert frames[0]["error"] == {
        "code": "internal",
        "message": "the 'stop' command failed: RuntimeError: boom",
    }
    assert "the 'stop' command failed" in caplog.text


def test_two_handlers_for_one_command_are_refused() -> None:
    registry = CommandRegistry()
    registry.register("pause", lambda boundary, cmd: None)
    with pytest.raises(ValueError, match="already has a handler"):
        registry.register("pause", lambda boundary, cmd: None)
    assert "pause" in registry and "resume" not in registry
