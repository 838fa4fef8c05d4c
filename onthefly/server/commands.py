"""Turning a client frame into a validated command, or into the error that answers it.

Every failure maps to one stable :data:`~onthefly.protocol.ErrorCode` and a message that
says what was wrong and what was expected — never a traceback. Also holds the per-client
token bucket that answers floods with ``rate_limited``.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass

from pydantic import ValidationError

from onthefly.protocol import (
    CLIENT_COMMAND,
    MAX_FRAME_BYTES,
    Command,
    ErrorCode,
)

COMMAND_TYPES: tuple[str, ...] = tuple(
    model.model_fields["type"].default for model in typing.get_args(typing.get_args(Command)[0])
)
"""Every command ``type`` of the protocol, in declaration order."""

_MAX_REPORTED_ERRORS = 3
_ID_PEEK_BYTES = 4096  # a flood of huge frames is not worth parsing just for its ids


@dataclass(frozen=True)
class Rejection:
    """Why a frame is not a command, as the ``error`` reply will say."""

    id: str | None
    code: ErrorCode
    message: str


def parse_command(frame: str | bytes) -> Command | Rejection:
    """Validate one client frame.

    Args:
        frame: the raw websocket message (text, or binary holding UTF-8 JSON).

    Returns:
        The command, or a :class:`Rejection` carrying the command's ``id`` when readable.

    Example:
        >>> parse_command('{"type": "ping", "id": "1"}').type
        'ping'
        >>> parse_command('{"type": "jump", "id": "2"}').code
        'unknown_type'
    """
    size = len(frame.encode() if isinstance(frame, str) else frame)
    if size > MAX_FRAME_BYTES:
        return Rejection(
            None, "frame_too_large", f"frame of {size} bytes; expected at most {MAX_FRAME_BYTES}"
        )
    try:
        data = json.loads(frame)
    except (ValueError, UnicodeDecodeError) as exc:
        return Rejection(None, "bad_json", f"frame is not valid JSON ({exc}); expected an object")
    if not isinstance(data, dict):
        return Rejection(
            None, "bad_json", f"frame is a JSON {type(data).__name__}; expected an object"
        )
    command_id = _id_of(data)
    kind = data.get("type")
    if kind not in COMMAND_TYPES:
        expected = ", ".join(COMMAND_TYPES)
        return Rejection(
            command_id, "unknown_type", f"unknown command type {kind!r}; expected one of {expected}"
        )
    try:
        return CLIENT_COMMAND.validate_python(data)
    except ValidationError as exc:
        return Rejection(command_id, "bad_message", condense(exc, tagged=True))


def read_id(frame: str | bytes) -> str | None:
    """The ``id`` of a small frame, if readable (to address an error without validating)."""
    if len(frame) > _ID_PEEK_BYTES:
        return None
    try:
        data = json.loads(frame)
    except (ValueError, UnicodeDecodeError):
        return None
    return _id_of(data) if isinstance(data, dict) else None


def _id_of(data: dict[str, object]) -> str | None:
    raw_id = data.get("id")
    if not (isinstance(raw_id, str) and 0 < len(raw_id) <= 64):
        return None
    try:
        raw_id.encode()
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): no JSON answer can carry it
        return None
    return raw_id


def condense(exc: ValidationError, *, tagged: bool = False) -> str:
    """Pydantic's errors as one line: ``field 'since': Input should be ... ; ...``.

    Args:
        exc: the validation error.
        tagged: the error comes from a discriminated union, whose tag (e.g. ``subscribe``)
            leads every location and is not a field.
    """
    parts = []
    for error in exc.errors()[:_MAX_REPORTED_ERRORS]:
        location = ".".join(str(item) for item in error["loc"][int(tagged) :]) or "(message)"
        parts.append(f"field {location!r}: {error['msg']}")
    more = exc.error_count() - _MAX_REPORTED_ERRORS
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


class TokenBucket:
    """Allows ``rate`` frames per second with bursts of ``burst`` (sans I/O: time is passed in).

    Example:
        >>> bucket = TokenBucket(rate=1, burst=2)
        >>> [bucket.allow(now=0.0) for _ in range(3)]
        [True, True, False]
    """

    def __init__(self, rate: float = 200.0, burst: float = 400.0) -> None:
        self._rate = rate
        self._burst = burst
        self._tokens = burst
        self._last: float | None = None

    def allow(self, now: float) -> bool:
        """Take one token if there is one; ``now`` is a monotonic clock in seconds."""
        if self._last is not None:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._rate)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False
