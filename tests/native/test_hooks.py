"""Hook dispatch and start/end pairing."""

from __future__ import annotations

from typing import Any

import pytest

from onthefly.native.hooks import Hooks, callback_list, state_key


class Host:
    lightning_module = "model"


class Log:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def on_x_start(self, trainer: Any, module: Any, *args: Any) -> None:
        self.calls.append(("start", module, *args))

    def on_x_end(self, trainer: Any, module: Any, *args: Any) -> None:
        self.calls.append(("end", module, *args))


def test_paired_fires_end_with_the_arguments_the_block_set() -> None:
    log = Log()
    hooks = Hooks(Host(), [log, object()])  # objects without the hook are skipped
    with hooks.paired("x", 1) as end:
        end.args = ("out", 1)
    with hooks.paired("x", 2):
        pass
    assert log.calls == [
        ("start", "model", 1),
        ("end", "model", "out", 1),
        ("start", "model", 2),
        ("end", "model", 2),
    ]


def test_paired_skips_the_end_hook_when_the_block_raises() -> None:
    log = Log()
    hooks = Hooks(Host(), [log])
    with pytest.raises(ValueError), hooks.paired("x"):
        raise ValueError
    assert [c[0] for c in log.calls] == ["start"]


def test_callbacks_added_later_are_called() -> None:
    callbacks: list[object] = []
    hooks = Hooks(Host(), callbacks)
    log = Log()
    callbacks.append(log)
    hooks.call("on_x_start")
    assert log.calls == [("start", "model")]


def test_state_key_and_callback_list() -> None:
    assert state_key(Log()) == "Log"
    log = Log()
    assert callback_list(log) == [log]
    assert callback_list((log,)) == [log]
