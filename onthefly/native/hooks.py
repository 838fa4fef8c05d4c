"""Calling Lightning-named hooks on callbacks; every ``*_start`` is paired with its ``*_end``.

Hooks are looked up by name (``getattr(callback, "on_train_start")``), as Lightning does, so any
``lightning.pytorch.Callback`` runs unchanged; plain objects may implement just the hooks they
need. Each hook receives ``(trainer, model, *args)`` where ``model`` is the user's ``nn.Module``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any


class EndArgs:
    """The arguments of the pending ``*_end`` hook; a level sets them once it knows its outputs."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args


def state_key(callback: object) -> str:
    """The key a callback's state is saved under (Lightning's ``Callback.state_key``)."""
    key = getattr(callback, "state_key", None)
    return key if isinstance(key, str) else type(callback).__qualname__


class Hooks:
    """Dispatches hooks to callbacks in list order.

    Args:
        trainer: passed as the first argument of every hook.
        callbacks: the callback objects; the list is shared, so appending to it takes effect.
    """

    def __init__(self, trainer: Any, callbacks: list[object]) -> None:
        self._trainer = trainer
        self.callbacks = callbacks

    def call(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call hook ``name`` on every callback that has it."""
        model = self._trainer.lightning_module
        for callback in self.callbacks:
            hook = getattr(callback, name, None)
            if callable(hook):
                hook(self._trainer, model, *args, **kwargs)

    @contextmanager
    def paired(self, level: str, *args: Any) -> Iterator[EndArgs]:
        """Fire ``on_{level}_start(*args)`` now and ``on_{level}_end`` when the block completes.

        The end hook gets ``args`` unless the block replaces ``EndArgs.args`` (batch ends also
        receive the step's outputs). If the block raises, the end hook is skipped, as in
        Lightning: the exception goes to ``on_exception`` instead.
        """
        self.call(f"on_{level}_start", *args)
        end = EndArgs(args)
        yield end
        self.call(f"on_{level}_end", *end.args)

    def state_dicts(self) -> dict[str, dict[str, Any]]:
        """Each stateful callback's ``state_dict()``, keyed by its ``state_key``."""
        states: dict[str, dict[str, Any]] = {}
        for callback in self.callbacks:
            state_dict = getattr(callback, "state_dict", None)
            if callable(state_dict):
                state = state_dict()
                if state:
                    states[state_key(callback)] = state
        return states

    def load_state_dicts(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Give each callback the state saved under its ``state_key``; others are left alone."""
        for callback in self.callbacks:
            load = getattr(callback, "load_state_dict", None)
            key = state_key(callback)
            if callable(load) and key in states:
                load(dict(states[key]))


def callback_list(callbacks: Sequence[object] | object) -> list[object]:
    """A fresh list from ``callbacks=`` (a sequence, or a single callback)."""
    if isinstance(callbacks, (list, tuple)):
        return list(callbacks)
    return [callbacks]
