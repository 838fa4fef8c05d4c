"""Which control commands every rank executes, and their copies on the ranks without a server.

Only global rank 0 receives commands. The *collective* ones change what every rank does or
need every rank's part, so each rank runs the same handler at the same batch boundary:
``pause``, ``resume``, ``stop``, ``test``, ``set``, ``export`` and the ``distribution``
health check. Rank 0 answers the client; on the other ranks the handler gets a
:class:`MirrorCommand`, whose answer stays local (a failure there is logged). Every other
command (queries, snapshots, the other health checks, …) runs on rank 0 alone.
"""

from __future__ import annotations

import logging
from typing import Any

from onthefly.protocol import CLIENT_COMMAND, Command

log = logging.getLogger(__name__)

COLLECTIVE_COMMANDS = frozenset({"pause", "resume", "stop", "test", "set", "export"})
"""Command types every rank executes (plus ``health`` with ``check="distribution"``)."""


def is_collective(command: Command) -> bool:
    """Whether every rank executes ``command``."""
    kind = command.type
    if kind == "health":
        return getattr(command, "check", None) == "distribution"
    return kind in COLLECTIVE_COMMANDS


def encode(command: Command) -> dict[str, Any]:
    """``command`` as plain data for a broadcast."""
    return command.model_dump(mode="json")


class MirrorCommand:
    """A copy of one of rank 0's commands, run on another rank; its answer stays local.

    It offers what handlers use of :class:`~onthefly.server.PendingCommand`: ``command``,
    ``run``, ``answered``, ``reply`` and ``fail``.

    Args:
        data: the command as :func:`encode` made it.
        rank: this rank (for the log).
    """

    def __init__(self, data: dict[str, Any], rank: int) -> None:
        self.command: Command = CLIENT_COMMAND.validate_python(data)
        self.run = str(data.get("run") or "")
        self.rank = rank
        self.answered = False
        self.failure: tuple[str, str] | None = None

    def reply(self, data: Any) -> None:
        """Record the success (rank 0 answers the client with its own reply model)."""
        self.answered = True

    def fail(self, code: str, message: str) -> None:
        """Record and log the failure (rank 0 answers the client; it normally failed alike)."""
        if self.answered:
            return
        self.answered = True
        self.failure = (code, message)
        log.info(
            "rank %d: its copy of the %r command failed (%s): %s",
            self.rank,
            self.command.type,
            code,
            message,
        )
