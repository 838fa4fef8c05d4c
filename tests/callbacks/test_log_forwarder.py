"""LogForwarder against the real logging and warnings machinery."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import pytest

from onthefly.callbacks._log_forwarder import LogForwarder, level_name


@pytest.fixture
def forwarded() -> Any:
    records: list[dict[str, Any]] = []
    forwarder = LogForwarder(lambda body: records.append(body.record.model_dump()), level="info")
    showwarning = warnings.showwarning
    forwarder.install()
    yield records
    forwarder.uninstall()
    assert forwarder not in logging.getLogger().handlers
    assert warnings.showwarning == showwarning


def test_records_at_or_above_the_level_are_forwarded(forwarded: list[dict[str, Any]]) -> None:
    user = logging.getLogger("user.module")
    user.setLevel(logging.DEBUG)
    user.debug("too low")
    user.info("epoch %d done", 3)
    try:
        raise ValueError("bad batch")
    except ValueError:
        user.exception("step failed")
    assert [(r["level"], r["logger"]) for r in forwarded] == [
        ("INFO", "user.module"),
        ("ERROR", "user.module"),
    ]
    assert forwarded[0]["message"] == "epoch 3 done"
    assert "ValueError: bad batch" in forwarded[1]["message"]


def test_the_servers_own_records_are_never_forwarded(forwarded: list[dict[str, Any]]) -> None:
    logging.getLogger("onthefly.server.transport").error("client gone")
    logging.getLogger("websockets.server").error("connection closed")
    assert forwarded == []


def test_warnings_are_forwarded_and_still_shown() -> None:
    forwarded: list[dict[str, Any]] = []
    forwarder = LogForwarder(lambda body: forwarded.append(body.record.model_dump()))
    # pytest.warns records what reaches the previous hook: the warning is still shown.
    with pytest.warns(RuntimeWarning, match="lr too high"):
        forwarder.install()
        warnings.warn("lr too high", RuntimeWarning, stacklevel=1)
        forwarder.uninstall()
    [record] = forwarded
    assert record["level"] == "WARNING" and record["logger"] == "py.warnings"
    assert record["message"].startswith("RuntimeWarning: lr too high (")


def test_a_publisher_that_fails_drops_the_record_quietly() -> None:
    def broken(**record: Any) -> None:
        raise RuntimeError("server gone")

    forwarder = LogForwarder(broken)
    forwarder.emit(logging.makeLogRecord({"name": "x", "levelno": logging.ERROR, "msg": "m"}))


@pytest.mark.parametrize(
    ("levelno", "name"),
    [(5, "DEBUG"), (10, "DEBUG"), (25, "INFO"), (30, "WARNING"), (45, "ERROR"), (60, "CRITICAL")],
)
def test_level_names(levelno: int, name: str) -> None:
    assert level_name(levelno) == name
