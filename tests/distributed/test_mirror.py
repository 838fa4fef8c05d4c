"""Which commands every rank runs, and their copies on the other ranks."""

from __future__ import annotations

import logging

import pytest

from onthefly.distributed.mirror import MirrorCommand, encode, is_collective
from onthefly.protocol import CLIENT_COMMAND, Command, SetReply


def _command(**fields: object) -> Command:
    return CLIENT_COMMAND.validate_python({"id": "c1", **fields})


@pytest.mark.parametrize(
    ("fields", "collective"),
    [
        ({"type": "pause"}, True),
        ({"type": "resume", "steps": 5}, True),
        ({"type": "stop"}, True),
        ({"type": "test"}, True),
        ({"type": "set", "lr": 0.1}, True),
        ({"type": "export", "path": "/tmp/x.otf"}, True),
        ({"type": "health", "check": "distribution"}, True),
        ({"type": "health", "check": "instability"}, False),
        ({"type": "histogram"}, False),
        ({"type": "checkpoints"}, False),
        ({"type": "import", "path": "/tmp/x.otf"}, False),
    ],
)
def test_commands_that_change_every_rank_are_collective(
    fields: dict[str, object], collective: bool
) -> None:
    assert is_collective(_command(**fields)) is collective


def test_a_copy_answers_locally_and_logs_its_failure(caplog: pytest.LogCaptureFixture) -> None:
    original = _command(type="set", lr=0.5, group=1)
    copy = MirrorCommand(encode(original), rank=1)
    assert copy.command == original
    copy.reply(SetReply(step=3, changes=[]))
    assert copy.answered and copy.failure is None

    failing = MirrorCommand(encode(original), rank=1)
    with caplog.at_level(logging.INFO, "onthefly.distributed.mirror"):
        failing.fail("unsupported", "no param group 1")
        failing.fail("internal", "ignored: answered already")
    assert failing.failure == ("unsupported", "no param group 1")
    assert "rank 1: its copy of the 'set' command failed (unsupported)" in caplog.text
