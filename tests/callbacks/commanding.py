"""Send commands from inside a fit so that they take effect at a known boundary.

:class:`CommandsAt` sends its commands when step ``step`` starts, then waits until the
session server has handed all of them to the training thread's inbox: they run at the end
of that very step (the first boundary after it), however loaded the machine is.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl

from onthefly import OnTheFly
from tests.callbacks.conftest import Connect


def session_of(trainer: Any) -> Any:
    """The run's :class:`~onthefly.callbacks.session.RunSession`."""
    return next(cb for cb in trainer.callbacks if isinstance(cb, OnTheFly)).session


def send_now(
    trainer: Any, client: Any, commands: Sequence[tuple[str, dict[str, Any]]]
) -> list[str]:
    """Send ``commands`` and wait until the server handed them all to the training thread's
    inbox (so they run at the next boundary the training thread reaches); their ids."""
    inbox = session_of(trainer).server.inbox
    waiting = inbox.qsize()
    ids = [client.send(kind, **fields) for kind, fields in commands]
    deadline = time.monotonic() + 30
    while inbox.qsize() < waiting + len(ids):
        assert time.monotonic() < deadline, "the commands never reached the inbox"
        time.sleep(0.002)
    return ids


class CommandsAt(pl.Callback):
    """Sends ``commands`` (``(type, fields)`` pairs) when step ``step`` starts.

    Attributes:
        ids: the command ids, in order (answers are in ``connect.client.answers``).
    """

    def __init__(self, connect: Connect, step: int, *commands: tuple[str, dict[str, Any]]):
        self.connect, self.step, self.commands = connect, step, commands
        self.ids: list[str] = []

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if trainer.global_step + 1 != self.step or self.ids:
            return
        client = self.connect.client
        assert client is not None
        self.ids = send_now(trainer, client, self.commands)

    def answers(self) -> list[dict[str, Any]]:
        """The answer frames, in command order (once the run finished)."""
        client = self.connect.client
        assert client is not None
        return [client.wait(lambda i=i: client.answers.get(i)) for i in self.ids]
