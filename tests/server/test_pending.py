"""A control command's single answer: typed by the command, serialised once."""

from __future__ import annotations

import json

import pytest

from onthefly.errors import ConfigurationError
from onthefly.protocol import CLIENT_COMMAND, Cancelled, Position, ScanReply
from onthefly.server.pending import PendingCommand


def _pending(kind: str, **fields: object) -> tuple[PendingCommand, list[dict[str, object]]]:
    frames: list[dict[str, object]] = []
    command = CLIENT_COMMAND.validate_python({"type": kind, "id": "c1", **fields})
    return PendingCommand(
        command, "main", lambda render: frames.append(json.loads(render()))
    ), frames


def test_a_reply_is_its_commands_model_without_the_fields_left_unset() -> None:
    pending, frames = _pending("scan", split="val")
    pending.reply(Cancelled(cancelled=True, split="val"))
    assert frames == [{"type": "reply", "id": "c1", "data": {"cancelled": True, "split": "val"}}]


def test_a_reply_of_another_commands_model_is_refused_before_anything_is_sent() -> None:
    pending, frames = _pending("scan")
    with pytest.raises(
        ConfigurationError, match="answered with ScanReply or Cancelled; got Position"
    ):
        pending.reply(Position(state="paused", step=3, epoch=0))
    assert frames == [] and not pending.answered
    done = ScanReply(
        split="train",
        source="scan",
        step=3,
        cancelled=False,
        duration=0.5,
        samples_per_s=None,
        size=10,
        loss_mean=None,
        loss_min=None,
        loss_max=None,
    )
    pending.reply(done)
    assert frames[0]["data"]["size"] == 10  # type: ignore[index]
