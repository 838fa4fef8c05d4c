"""Hook dispatch and start/end pairing."""

from __future__ import annotations

from typing import Any

import pytest
from lightning.pytorch import Callback

from onthefly.native.hooks import Hooks, callback_list, implementation, state_key


class Host:
    model = lightning_module = "model"


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


def test_a_callback_replaced_in_the_list_is_called_instead() -> None:
    first, second = Log(), Log()
    callbacks: list[object] = [first]
    hooks = Hooks(Host(), callbacks)
    hooks.call("on_x_start", 1)
    callbacks[0] = second
    hooks.call("on_x_start", 2)
    assert (first.calls, second.calls) == ([("start", "model", 1)], [("start", "model", 2)])


class BatchLog(Callback):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        self.calls.append("batch_start")

    def on_before_zero_grad(self, trainer: Any, pl_module: Any, optimizer: Any) -> None:
        self.calls.append("before_zero_grad")


def test_the_batch_hooks_follow_the_callbacks_and_the_model_from_one_batch_to_the_next() -> None:
    host = Host()
    first, second = BatchLog(), BatchLog()
    callbacks: list[object] = [first]
    hooks = Hooks(host, callbacks)
    step = hooks.for_batch()
    assert step is hooks.step and hooks.for_batch() is step  # nothing changed: the same
    assert step.train_batch_start == [first.on_train_batch_start]
    assert step.before_zero_grad == [first.on_before_zero_grad]
    assert step.after_backward == [] and step.model == "model"
    hooks.call("on_train_start")  # another hook's call rebuilding the table changes nothing
    callbacks.append(second)
    hooks.call("on_train_end")
    assert hooks.step is step  # a callback added during a batch joins at the next one
    assert hooks.for_batch().before_zero_grad == [
        first.on_before_zero_grad,
        second.on_before_zero_grad,
    ]
    host.model = "another model"
    assert hooks.for_batch().model == "another model"


class Started(Callback):
    def __init__(self) -> None:
        self.started = 0

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self.started += 1


def test_only_hooks_a_callback_defines_itself_are_dispatched() -> None:
    started = Started()
    # Lightning's empty defaults are skipped; overrides and instance attributes are not.
    assert implementation(started, "on_train_end") is None
    assert implementation(started, "on_train_start") == started.on_train_start
    started.on_train_end = lambda *args: None  # type: ignore[method-assign]
    assert implementation(started, "on_train_end") is started.on_train_end
    assert implementation(object(), "on_train_start") is None
    hooks = Hooks(Host(), [started])
    hooks.call("on_train_start")
    hooks.call("on_validation_start")
    assert started.started == 1


def test_state_key_and_callback_list() -> None:
    assert state_key(Log()) == "Log"
    log = Log()
    assert callback_list(log) == [log]
    assert callback_list((log,)) == [log]
