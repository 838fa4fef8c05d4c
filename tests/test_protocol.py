"""The wire protocol against its golden examples, and the rules every message obeys."""

from __future__ import annotations

import json
import math
import typing
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from onthefly.protocol import (
    CLIENT_COMMAND,
    SERVER_MESSAGE,
    Command,
    MetricsEvent,
    RuntimeEvent,
    Series,
    ServerMessage,
    StepsEvent,
    TestResult,
)
from tests.golden import (
    ADAPTERS,
    DIRECTIONS,
    EXAMPLES,
    Direction,
    example_files,
    load_strict,
    loads_strict,
    tag_of,
)

VALID = [(d, p) for d in DIRECTIONS for p in example_files("valid", d)]
INVALID = [(d, p) for d in DIRECTIONS for p in example_files("invalid", d)]


def _ids(cases: list[tuple[Direction, Path]]) -> list[str]:
    return [f"{d}/{p.stem}" for d, p in cases]


def _members(union: Any) -> list[type[BaseModel]]:
    """The models of a discriminated union (``Annotated[A | B, Field(...)]``)."""
    return list(typing.get_args(typing.get_args(union)[0]))


def _tags(union: Any) -> set[str]:
    return {model.model_fields["type"].default for model in _members(union)}


UNIONS: dict[Direction, Any] = {"server": ServerMessage, "command": Command}


@pytest.mark.parametrize(("direction", "path"), VALID, ids=_ids(VALID))
def test_valid_example_validates_and_round_trips(direction: Direction, path: Path) -> None:
    adapter = ADAPTERS[direction]
    message = adapter.validate_json(path.read_bytes())
    assert message.type == tag_of(path), "the file name must start with the message type"
    assert adapter.validate_json(adapter.dump_json(message)) == message


@pytest.mark.parametrize("path", example_files("valid", "server"), ids=lambda p: p.stem)
def test_valid_server_example_is_what_the_server_writes(path: Path) -> None:
    """Server examples are canonical, so the dashboard's tests see real frames."""
    message = SERVER_MESSAGE.validate_json(path.read_bytes())
    assert json.loads(SERVER_MESSAGE.dump_json(message)) == load_strict(path)


@pytest.mark.parametrize(("direction", "path"), INVALID, ids=_ids(INVALID))
def test_invalid_example_is_rejected(direction: Direction, path: Path) -> None:
    with pytest.raises((ValueError, ValidationError)):
        ADAPTERS[direction].validate_python(load_strict(path))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_every_message_type_has_a_valid_example(direction: Direction) -> None:
    covered = {tag_of(path) for path in example_files("valid", direction)}
    missing = _tags(UNIONS[direction]) - covered
    assert not missing, (
        f"add tests/protocol_examples/valid/{direction}/<type>.json for: {sorted(missing)}"
    )


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_no_example_names_an_unknown_type(direction: Direction) -> None:
    stale = {tag_of(p) for p in example_files("valid", direction)} - _tags(UNIONS[direction])
    assert not stale


@pytest.mark.parametrize("command", _members(Command), ids=lambda m: m.__name__)
def test_every_command_requires_an_id(command: type[BaseModel]) -> None:
    tag = command.model_fields["type"].default
    with pytest.raises(ValidationError) as raised:
        CLIENT_COMMAND.validate_python({"type": tag})
    assert ("id",) in [tuple(err["loc"])[1:] for err in raised.value.errors()]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_floats_serialise_as_null(bad: float) -> None:
    envelope: dict[str, Any] = {"session": "s", "run": "r", "seq": 1, "time": 0.0}
    messages: list[Any] = [
        MetricsEvent(**envelope, step=1, epoch=0, values={"loss": bad, "lr": 0.1}),
        TestResult(**envelope, label="t", step=1, loss=bad, metrics={"acc": bad}, duration=1.0),
        RuntimeEvent(**envelope, step=1, step_time=bad, samples_per_s=bad),
    ]
    for message in messages:
        frame = SERVER_MESSAGE.dump_json(message)
        decoded = loads_strict(frame)
        assert b"null" in frame
        assert SERVER_MESSAGE.validate_python(decoded).type == message.type
    series = Series(steps=[1, 2], values=[bad, 1.0])
    assert json.loads(series.model_dump_json())["values"] == [None, 1.0]


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_floats_that_cannot_be_null_refuse_non_finite_values(bad: float) -> None:
    """A NaN ``time`` would go out as ``null`` and every receiver would reject the frame."""
    envelope: dict[str, Any] = {"session": "s", "run": "r", "seq": 1}
    with pytest.raises(ValidationError, match="finite"):
        MetricsEvent(**envelope, time=bad, step=1, epoch=0, values={})
    with pytest.raises(ValidationError, match="finite"):
        TestResult(**envelope, time=0.0, label="t", step=1, loss=None, metrics={}, duration=bad)


def test_a_steps_event_has_one_epoch_per_step_and_one_value_per_point() -> None:
    envelope: dict[str, Any] = {"session": "s", "run": "r", "seq": 1, "time": 0.0}
    points = {"steps": [1, 2], "values": [0.5, math.nan]}
    event = StepsEvent(**envelope, steps=[1, 2], epochs=[0, 0], values={"loss": points})
    assert loads_strict(SERVER_MESSAGE.dump_json(event))["values"]["loss"]["values"] == [0.5, None]
    with pytest.raises(ValidationError, match="expected one epoch per step"):
        StepsEvent(**envelope, steps=[1, 2], epochs=[0], values={})
    with pytest.raises(ValidationError, match="expected one value per step"):
        StepsEvent(
            **envelope, steps=[1, 2], epochs=[0, 0], values={"loss": {"steps": [1], "values": []}}
        )


def test_unknown_fields_are_rejected_in_nested_payloads() -> None:
    frame = load_strict(EXAMPLES / "valid" / "server" / "snapshot.json")
    frame["runs"][0]["series"]["train/loss"]["colour"] = "red"
    with pytest.raises(ValidationError, match="colour"):
        SERVER_MESSAGE.validate_python(frame)
