"""The inbox as seen from inside a long command (a scan, a fork, a merge).

While such a command runs, the training thread does not drain the inbox; the command calls
:meth:`Interrupts.check` between batches instead: a ``cancel`` stops it (and is answered
at once), anything else waits and is run in order once the command ends
(:meth:`Interrupts.replay`).
"""

from __future__ import annotations

import queue
from typing import TYPE_CHECKING, Any, Protocol

from onthefly.commands.registry import Boundary, CommandRegistry
from onthefly.protocol import CancelReply

if TYPE_CHECKING:
    from onthefly.server import PendingCommand, SessionServer


class Inbox(Protocol):
    """Where the commands come from (the run's session) and where they are routed."""

    commands: CommandRegistry

    @property
    def server(self) -> SessionServer | None: ...


class Interrupts:
    """``cancel`` stops the running command, the rest waits.

    Args:
        session: the run's session.
        **answer: what the reply to a ``cancel`` carries besides ``cancelled: true``.

    Example:
        >>> interrupts = Interrupts(session, split="val")  # doctest: +SKIP
        >>> run_scan(..., cancelled=interrupts.check)  # doctest: +SKIP
        >>> interrupts.replay(boundary)  # doctest: +SKIP
    """

    def __init__(self, session: Inbox, **answer: Any) -> None:
        self.session = session
        self.answer = answer
        self.held: list[PendingCommand] = []
        self.cancelled = False

    def check(self) -> bool:
        """Take what the inbox holds; ``True`` once a ``cancel`` came."""
        server = self.session.server
        while server is not None:
            try:
                cmd = server.inbox.get_nowait()
            except queue.Empty:
                break
            if cmd.command.type == "cancel":
                self.cancelled = True
                cmd.reply(CancelReply(cancelled=True, **self.answer))
            else:
                self.held.append(cmd)
        return self.cancelled

    def replay(self, boundary: Boundary) -> None:
        """Run the commands that waited, in order."""
        held, self.held = self.held, []
        for cmd in held:
            self.session.commands.dispatch(boundary, cmd)
