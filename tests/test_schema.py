"""The committed JSON Schema is current and agrees with the golden examples."""

from __future__ import annotations

import functools
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from onthefly import schema
from onthefly.protocol import REPLIES, Command, ServerMessage
from tests.golden import DIRECTIONS, Direction, example_files, load_strict, reply_files, tag_of

ROOTS: dict[Direction, str] = {"server": "ServerMessage", "command": "Command"}


@functools.cache
def _validator(direction: Direction) -> Draft202012Validator:
    document: dict[str, Any] = json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8"))
    document["$ref"] = f"#/$defs/{ROOTS[direction]}"
    Draft202012Validator.check_schema(document)
    return Draft202012Validator(document)


@functools.cache
def _reply_validator(command: str) -> Draft202012Validator:
    document: dict[str, Any] = json.loads(schema.SCHEMA_PATH.read_text(encoding="utf-8"))
    document["$ref"] = f"#/$defs/Replies/properties/{command}"
    return Draft202012Validator(document)


def _cases(validity: str) -> list[Any]:
    return [
        pytest.param(d, p, id=f"{d}/{p.stem}")
        for d in DIRECTIONS
        for p in example_files(validity, d)  # type: ignore[arg-type]
    ]


def test_committed_schema_is_current() -> None:
    committed = schema.SCHEMA_PATH.read_text(encoding="utf-8")
    assert committed == schema.render(), (
        f"{schema.SCHEMA_PATH.name} is stale: run `{schema.REGENERATE}` and commit the result"
    )


@pytest.mark.parametrize(("direction", "path"), _cases("valid"))
def test_schema_accepts_valid_example(direction: Direction, path: Path) -> None:
    errors = [e.message for e in _validator(direction).iter_errors(load_strict(path))]
    assert not errors


@pytest.mark.parametrize(("direction", "path"), _cases("invalid"))
def test_schema_rejects_invalid_example(direction: Direction, path: Path) -> None:
    try:
        document = load_strict(path)
    except ValueError:
        return  # not JSON at all: JSON.parse refuses it before the schema is consulted
    assert not _validator(direction).is_valid(document)


def test_type_tag_is_required_everywhere() -> None:
    defs = json.loads(schema.render())["$defs"]
    tagged = {
        name: d for name, d in defs.items() if "const" in d.get("properties", {}).get("type", {})
    }
    members = [
        m for union in (ServerMessage, Command) for m in typing.get_args(typing.get_args(union)[0])
    ]
    assert {m.__name__ for m in members} <= tagged.keys()
    for name, definition in tagged.items():
        assert "type" in definition["required"], name


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_schema_rejects_a_message_without_its_type_tag(direction: Direction) -> None:
    for path in example_files("valid", direction):
        untagged = {k: v for k, v in load_strict(path).items() if k != "type"}
        assert not _validator(direction).is_valid(untagged), path.name


def test_the_schema_maps_every_command_to_its_reply_model() -> None:
    replies = json.loads(schema.render())["$defs"]["Replies"]
    assert set(replies["properties"]) == set(REPLIES) == set(replies["required"])


@pytest.mark.parametrize("path", reply_files("valid"), ids=lambda p: p.stem)
def test_schema_accepts_valid_reply_example(path: Path) -> None:
    errors = [e.message for e in _reply_validator(tag_of(path)).iter_errors(load_strict(path))]
    assert not errors


@pytest.mark.parametrize("path", reply_files("invalid"), ids=lambda p: p.stem)
def test_schema_rejects_invalid_reply_example(path: Path) -> None:
    assert not _reply_validator(tag_of(path)).is_valid(load_strict(path))
