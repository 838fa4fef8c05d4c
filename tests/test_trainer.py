"""``onthefly.Trainer``: the loop's options reach the loop, the rest reach the session."""

from __future__ import annotations

import inspect

import pytest

import onthefly
from onthefly.callbacks.onthefly import OnTheFly
from onthefly.errors import ConfigurationError
from onthefly.native.options import LoopOptions
from onthefly.trainer import SessionOptions, TrainerOptions


def test_the_session_options_are_the_callback_s_own() -> None:
    own = set(inspect.signature(OnTheFly).parameters) - {"project", "run_name", "do_test_after"}
    assert SessionOptions.__optional_keys__ == own
    both = LoopOptions.__optional_keys__ | SessionOptions.__optional_keys__
    assert TrainerOptions.__optional_keys__ == both


def test_loop_options_go_to_the_loop_and_the_rest_to_the_session() -> None:
    trainer = onthefly.Trainer(
        project="t", max_steps=7, val_every_n_epochs=2, progress_bar=False, quiet=True, port=0
    )
    assert (trainer.max_steps, trainer.val_every_n_epochs) == (7, 2)
    [umbrella] = [cb for cb in trainer.callbacks if isinstance(cb, OnTheFly)]
    assert trainer.callbacks[0] is umbrella and umbrella.session.project == "t"


def test_the_native_loop_refuses_an_option_it_does_not_know() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown Trainer arguments \['epochs'\]"):
        onthefly.native.Trainer(max_steps=1, epochs=3)  # type: ignore[call-arg]
