"""Every command's reply is a protocol model: the golden reply examples, and the rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from onthefly.protocol import (
    REPLIES,
    Cancelled,
    MetricsBody,
    Position,
    ResumeReply,
    ScanReply,
    StatusBody,
    reply_fields,
)
from onthefly.server.commands import COMMAND_TYPES
from tests.golden import load_strict, reply_adapter, reply_files, tag_of

VALID = reply_files("valid")
INVALID = reply_files("invalid")


def test_every_command_type_has_a_reply_model_and_a_valid_example() -> None:
    assert set(REPLIES) == set(COMMAND_TYPES)
    assert {tag_of(path) for path in VALID} == set(COMMAND_TYPES)


@pytest.mark.parametrize("path", VALID, ids=[p.stem for p in VALID])
def test_valid_reply_example_is_what_the_server_writes(path: Path) -> None:
    data = load_strict(path)
    model = reply_adapter(tag_of(path)).validate_python(data)
    assert reply_fields(model) == data


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_reply_example_is_rejected(path: Path) -> None:
    with pytest.raises(ValidationError):
        reply_adapter(tag_of(path)).validate_python(load_strict(path))


def test_a_misspelt_reply_field_fails_when_the_reply_is_built() -> None:
    with pytest.raises(ValidationError, match="stpe"):
        Position(state="paused", stpe=3, step=3, epoch=0)  # type: ignore[call-arg]


def test_optional_fields_left_unset_are_not_sent() -> None:
    reply = ResumeReply(state="running", step=5, epoch=0, max_epochs=2, max_steps=-1)
    assert reply_fields(reply) == {
        "state": "running",
        "step": 5,
        "epoch": 0,
        "max_epochs": 2,
        "max_steps": -1,
    }
    later = ResumeReply(**reply_fields(reply), after_end={"steps": 5})
    assert reply_fields(later)["after_end"] == {"steps": 5}
    assert reply_fields(Cancelled(cancelled=True, split="val")) == {
        "cancelled": True,
        "split": "val",
    }


def test_a_finished_scan_and_a_cancelled_one_are_told_apart_by_cancelled() -> None:
    adapter = reply_adapter("scan")
    done = adapter.validate_python(load_strict(reply_files("valid")[0].parent / "scan.json"))
    assert isinstance(done, ScanReply)
    assert isinstance(adapter.validate_python({"cancelled": True, "split": "train"}), Cancelled)


def test_event_bodies_check_their_fields_when_built() -> None:
    with pytest.raises(ValidationError, match="values"):
        MetricsBody(step=1, epoch=0, values={"loss": "low"})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="state"):
        StatusBody(state="sleeping", step=1, epoch=0)  # type: ignore[arg-type]
