"""The golden protocol examples in ``tests/protocol_examples/``, loaded for the protocol tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter

from onthefly.protocol import CLIENT_COMMAND, REPLIES, SERVER_MESSAGE

EXAMPLES = Path(__file__).resolve().parent / "protocol_examples"
Direction = Literal["server", "command"]
DIRECTIONS: tuple[Direction, ...] = ("server", "command")
ADAPTERS: dict[Direction, TypeAdapter[Any]] = {"server": SERVER_MESSAGE, "command": CLIENT_COMMAND}


def example_files(validity: Literal["valid", "invalid"], direction: Direction) -> list[Path]:
    """The example files of one folder, sorted by name."""
    return sorted((EXAMPLES / validity / direction).glob("*.json"))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259); the protocol sends null instead")


def loads_strict(text: str | bytes) -> Any:
    """Parse like a browser's ``JSON.parse``: ``NaN`` and ``Infinity`` literals are errors."""
    return json.loads(text, parse_constant=_reject_constant)


def load_strict(path: Path) -> Any:
    """:func:`loads_strict` of a file."""
    return loads_strict(path.read_bytes())


def reply_files(validity: Literal["valid", "invalid"]) -> list[Path]:
    """The reply-data examples of one folder (``<command>[-<case>].json``), sorted by name."""
    return sorted((EXAMPLES / validity / "reply").glob("*.json"))


def reply_adapter(command: str) -> TypeAdapter[Any]:
    """Validates the data of the reply to a ``command`` command."""
    return TypeAdapter(REPLIES[command])


def tag_of(path: Path) -> str:
    """The message (or command) type an example's file name claims (``metrics-nan`` ->
    ``metrics``)."""
    return path.stem.split("-", 1)[0]
