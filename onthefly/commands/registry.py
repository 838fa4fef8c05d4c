"""Control commands run on the training thread: a registry mapping command type to handler.

A handler runs at a batch boundary with the model quiet, so it may read or change the
model, the optimizers and the trainer's limits. Features plug in by registering a handler
for their command type (``pause`` and ``resume`` come from :class:`PauseGate`, ``test`` from
:class:`TestLauncher`); the code that drains the inbox never changes.

A command never changes the run's random state: every handler runs with the global
generators and the run's loaders' own generators preserved
(:func:`onthefly.sessions.loader_rng.preserved`), so a test, a scan, a health check, a
fork, a comparison or a merge leaves the training's data order and random draws as they
would have been without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onthefly.errors import DistributedError
from onthefly.sessions import loader_rng, loaders

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Boundary:
    """Where a command runs: the trainer and module at a batch boundary.

    Attributes:
        trainer: the driving trainer (``lightning.Trainer`` or ``onthefly.Trainer``).
        module: the module being trained.
    """

    trainer: Any
    module: Any


Handler = Callable[[Boundary, "PendingCommand"], None]
"""Runs one command and answers it exactly once (``cmd.reply`` or ``cmd.fail``)."""


class CommandRegistry:
    """Command type -> handler, for the commands that act on the model.

    Example:
        >>> registry = CommandRegistry()
        >>> registry.register("ping", lambda boundary, cmd: cmd.reply())
        >>> "ping" in registry
        True
    """

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._running = 0

    @property
    def running(self) -> bool:
        """Whether a handler runs now (other threads read it, e.g. to not count a long scan
        as a stalled run)."""
        return self._running > 0

    def __contains__(self, kind: object) -> bool:
        return kind in self._handlers

    def register(self, kind: str, handler: Handler) -> None:
        """Route commands of type ``kind`` to ``handler``.

        Raises:
            ValueError: ``kind`` already has a handler (two features claiming one command).
        """
        if kind in self._handlers:
            raise ValueError(
                f"the command {kind!r} already has a handler; expected one handler per command type"
            )
        self._handlers[kind] = handler

    def dispatch(self, boundary: Boundary, cmd: PendingCommand) -> None:
        """Run ``cmd``'s handler; a failing handler answers ``internal`` and training goes on.

        Raises:
            DistributedError: the handler's collective with the other ranks failed (the run
                cannot go on).
        """
        kind = cmd.command.type
        handler = self._handlers.get(kind)
        if handler is None:
            cmd.fail("unsupported", f"this run cannot execute {kind!r} commands")
            return
        self._running += 1
        try:
            with loader_rng.preserved(loaders.run_loaders(boundary.trainer)):
                handler(boundary, cmd)
        except DistributedError as exc:
            cmd.fail("internal", str(exc))
            raise
        except Exception as exc:  # a bug in one command must never end the training run
            log.exception("the %r command failed", kind)
            cmd.fail("internal", f"the {kind!r} command failed: {type(exc).__name__}: {exc}")
        finally:
            self._running -= 1
