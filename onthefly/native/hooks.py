"""Calling Lightning-named hooks on callbacks; every ``*_start`` is paired with its ``*_end``.

Hooks are looked up by name (``getattr(callback, "on_train_start")``), as Lightning does, so any
``lightning.pytorch.Callback`` runs unchanged; plain objects may implement just the hooks they
need. Each hook receives ``(trainer, model, *args)`` where ``model`` is the user's ``nn.Module``.

A training step fires half a dozen hooks, so dispatch is kept to a table lookup: each hook
name maps to the bound methods of the callbacks that implement it, skipping the empty
defaults every callback inherits from ``lightning.pytorch.Callback``; the loop and the
default step call the per-batch hooks' lists themselves (:class:`StepHooks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_EMPTY_DEFAULTS = ("lightning.pytorch.callbacks.callback", "Callback")
"""Module and name of the class whose hooks are empty defaults (compared by name, so that
this module does not import Lightning)."""


def implementation(callback: object, name: str) -> Callable[..., Any] | None:
    """``callback``'s hook ``name`` as a bound method, or ``None`` when it has none of its own.

    Lightning's ``Callback`` defines every hook with an empty body; a callback that only
    inherits that default has nothing to run.
    """
    hook = getattr(callback, name, None)
    if not callable(hook):
        return None
    if name in getattr(callback, "__dict__", ()):
        return hook  # set on the instance
    owner = next((cls for cls in type(callback).__mro__ if name in vars(cls)), None)
    if owner is not None and (owner.__module__, owner.__qualname__) == _EMPTY_DEFAULTS:
        return None
    return hook


def implementations(callback: object, name: str) -> list[Callable[..., Any]]:
    """What calling hook ``name`` on ``callback`` runs, as a list of bound methods.

    A callback that bundles others may say which of their methods its hook would forward to
    (``hook_implementations(name)``, ``None`` when it handles the hook itself): calling
    those directly saves a forwarding call per hook, several times per step.
    """
    expand = getattr(callback, "hook_implementations", None)
    if callable(expand):
        methods = expand(name)
        if methods is not None:
            return list(methods)
    hook = implementation(callback, name)
    return [] if hook is None else [hook]


class HookTable:
    """Per hook name, the bound methods of the callbacks that implement it, in order.

    Built lazily, one name at a time, and rebuilt whenever the list of callbacks it is
    given differs from the one it was built from (a callback added, removed or replaced).

    Example:
        >>> table = HookTable()
        >>> table.hooks([object()], "on_train_start")
        []
    """

    def __init__(self) -> None:
        self._table: dict[str, list[Callable[..., Any]]] = {}
        self._built_from: list[object] = []

    def hooks(self, callbacks: list[Any], name: str) -> list[Callable[..., Any]]:
        """The implementations of hook ``name`` among ``callbacks``."""
        if self._built_from != callbacks:
            self._table, self._built_from = {}, list(callbacks)
        found = self._table.get(name)
        if found is None:
            found = self._table[name] = [
                hook for callback in callbacks for hook in implementations(callback, name)
            ]
        return found


STEP_HOOKS = (
    "on_train_batch_start",
    "on_before_zero_grad",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_train_batch_end",
)
"""The hooks every training batch fires (:class:`StepHooks`)."""


@dataclass(frozen=True)
class StepHooks:
    """The methods of the hooks a training batch fires, and the two arguments every hook
    gets first; :meth:`Hooks.for_batch` refreshes them at each batch's start.

    The loop and the default step call these lists themselves (``for hook in
    hooks.before_zero_grad: hook(hooks.trainer, hooks.model, optimizer)``): six hooks fire
    per step, and going through :meth:`Hooks.call` would add a Python call to each.
    """

    trainer: Any
    model: Any
    train_batch_start: list[Callable[..., Any]]
    before_zero_grad: list[Callable[..., Any]]
    before_backward: list[Callable[..., Any]]
    after_backward: list[Callable[..., Any]]
    before_optimizer_step: list[Callable[..., Any]]
    train_batch_end: list[Callable[..., Any]]


class EndArgs:
    """The arguments of the pending ``*_end`` hook; a level sets them once it knows its outputs."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        self.args = args


class Paired:
    """What :meth:`Hooks.paired` returns: a plain class, cheaper than ``@contextmanager`` for a
    block entered at every batch."""

    def __init__(self, hooks: Hooks, level: str, args: tuple[Any, ...]) -> None:
        self._hooks = hooks
        self._level = level
        self._end = EndArgs(args)

    def __enter__(self) -> EndArgs:
        self._hooks.call(f"on_{self._level}_start", *self._end.args)
        return self._end

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self._hooks.call(f"on_{self._level}_end", *self._end.args)


def state_key(callback: object) -> str:
    """The key a callback's state is saved under (Lightning's ``Callback.state_key``)."""
    key = getattr(callback, "state_key", None)
    return key if isinstance(key, str) else type(callback).__qualname__


class Hooks:
    """Dispatches hooks to callbacks in list order.

    Args:
        trainer: passed as the first argument of every hook; its ``model`` (the user's
            ``nn.Module``) is the second.
        callbacks: the callback objects; the list is shared, so appending to it takes effect.
    """

    def __init__(self, trainer: Any, callbacks: list[object]) -> None:
        self._trainer = trainer
        self.callbacks = callbacks
        self._table = HookTable()
        self.step = StepHooks(trainer, None, [], [], [], [], [], [])
        """The batch in progress's hooks (see :meth:`for_batch`)."""
        self._step_from: list[object] = []
        self._revisions: list[tuple[Any, int]] = []  # (callback, its hook_revision then)

    def for_batch(self) -> StepHooks:
        """:attr:`step`, made anew when the callbacks or the model changed since the last
        batch (a callback added during a batch takes part from the next one), or when a
        callback switched its hooks (its ``hook_revision`` changed: a hook that runs only
        for some steps, switched on or off at the end of the batch before)."""
        step, trainer = self.step, self._trainer
        stale = self._step_from != self.callbacks or step.model is not trainer.model
        for callback, revision in self._revisions:  # plain reads: this runs at every batch
            if callback.hook_revision != revision:
                stale = True
        if stale:
            self._table = HookTable()
            self._revisions = [
                (callback, callback.hook_revision)  # type: ignore[attr-defined]
                for callback in self.callbacks
                if isinstance(getattr(callback, "hook_revision", None), int)
            ]
            methods = {
                name.removeprefix("on_"): self._table.hooks(self.callbacks, name)
                for name in STEP_HOOKS
            }
            step = self.step = StepHooks(trainer, trainer.model, **methods)
            self._step_from = list(self.callbacks)
        return step

    def call(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call hook ``name`` on every callback that has it."""
        table = self._table
        # The table's fast path inlined, with a subscript rather than a call to ``get``:
        # this runs several times per step, and a name is missing only on its first call.
        try:
            current = table._built_from == self.callbacks
            hooks = table._table[name] if current else table.hooks(self.callbacks, name)
        except KeyError:  # the name's first call
            hooks = table.hooks(self.callbacks, name)
        if hooks:
            trainer = self._trainer
            model = trainer.model  # what ``lightning_module`` returns, without the property's call
            for hook in hooks:
                hook(trainer, model, *args, **kwargs)

    def paired(self, level: str, *args: Any) -> Paired:
        """Fire ``on_{level}_start(*args)`` now and ``on_{level}_end`` when the block completes.

        The end hook gets ``args`` unless the block replaces ``EndArgs.args`` (batch ends also
        receive the step's outputs). If the block raises, the end hook is skipped, as in
        Lightning: the exception goes to ``on_exception`` instead.
        """
        return Paired(self, level, args)

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
