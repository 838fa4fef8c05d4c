"""Frame parsing: every kind of bad input maps to one stable code and a useful message."""

from __future__ import annotations

import json

import pytest

from onthefly.protocol import MAX_FRAME_BYTES, Ping, Subscribe
from onthefly.server.commands import COMMAND_TYPES, Rejection, TokenBucket, parse_command


def test_a_valid_command_is_returned_validated() -> None:
    command = parse_command(json.dumps({"type": "subscribe", "id": "a", "since": 3}))
    assert isinstance(command, Subscribe)
    assert command.since == 3
    assert isinstance(parse_command(b'{"type": "ping", "id": "b"}'), Ping)


@pytest.mark.parametrize(
    ("frame", "code", "command_id", "words"),
    [
        ("{nope", "bad_json", None, "not valid JSON"),
        (b"\xff\xfe", "bad_json", None, "not valid JSON"),
        ("[1, 2]", "bad_json", None, "JSON list; expected an object"),
        ('{"type": "jump", "id": "j"}', "unknown_type", "j", "'jump'"),
        ('{"id": "n"}', "unknown_type", "n", "None"),
        ('{"type": "subscribe", "id": "s", "since": -1}', "bad_message", "s", "'since'"),
        ('{"type": "ping", "id": "p", "extra": 1}', "bad_message", "p", "'extra'"),
        ('{"type": "history", "id": "h"}', "bad_message", "h", "'metric'"),
        ('{"type": "ping"}', "bad_message", None, "'id'"),
    ],
)
def test_bad_frames_are_rejected_with_a_code(
    frame: str | bytes, code: str, command_id: str | None, words: str
) -> None:
    rejection = parse_command(frame)
    assert isinstance(rejection, Rejection)
    assert rejection.code == code
    assert rejection.id == command_id
    assert words in rejection.message
    assert "Traceback" not in rejection.message


def test_oversized_frames_are_rejected_before_parsing() -> None:
    rejection = parse_command("x" * (MAX_FRAME_BYTES + 1))
    assert isinstance(rejection, Rejection)
    assert rejection.code == "frame_too_large"
    assert str(MAX_FRAME_BYTES) in rejection.message


def test_unknown_type_lists_the_expected_ones() -> None:
    rejection = parse_command('{"type": "jump", "id": "j"}')
    assert isinstance(rejection, Rejection)
    assert all(kind in rejection.message for kind in COMMAND_TYPES)
    assert set(COMMAND_TYPES) >= {"subscribe", "pause", "history"}


def test_token_bucket_allows_bursts_then_the_rate() -> None:
    bucket = TokenBucket(rate=10, burst=20)
    assert sum(bucket.allow(now=0.0) for _ in range(30)) == 20
    assert sum(bucket.allow(now=1.0) for _ in range(30)) == 10  # one second refills ten
    assert sum(bucket.allow(now=100.0) for _ in range(30)) == 20  # never above the burst
