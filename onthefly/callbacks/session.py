"""One live session per run, shared by all of OnTheFly's callbacks.

:class:`RunSession` owns the :class:`~onthefly.server.SessionServer` (started on global rank
0 only), the run's state, and the batch boundary where control commands run: the training
thread drains the server's inbox there and dispatches each command through a
:class:`~onthefly.commands.registry.CommandRegistry`. Every other rank holds an inactive
session whose methods do nothing; in a distributed run, :attr:`RunSession.ranks` carries
rank 0's commands and decisions to them (see :mod:`onthefly.distributed.control`).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onthefly.callbacks._termination import SigtermHandler
from onthefly.commands.registry import Boundary, CommandRegistry
from onthefly.distributed.control import RankSync
from onthefly.drivers.base import TrainerHost
from onthefly.flagged_queue import FlaggedQueue
from onthefly.protocol import StatusBody

if TYPE_CHECKING:
    from onthefly.protocol import EventBody, RunState
    from onthefly.server import PendingCommand, SessionServer

log = logging.getLogger(__name__)

WAIT_SLICE_S = 0.2
"""How long a paused training thread blocks on the inbox at a time, so Ctrl+C stays prompt."""


class RunSession:
    """The live session of one run: server, run state and command boundary.

    Args:
        project: the project name shown by dashboards and the CLI.
        run_name: the main run's name; ``None`` names it after the start time.
        port: TCP port on 127.0.0.1; ``None`` picks a free one.
        home: folder for discovery files; ``None`` means ``$ONTHEFLY_HOME`` or ``~/.onthefly``.
        quiet: do not print the dashboard address when the server starts.

    Example:
        >>> session = RunSession("demo")
        >>> session.active  # the server starts in ``open``, on global rank 0 only
        False
    """

    def __init__(
        self,
        project: str,
        run_name: str | None = None,
        port: int | None = None,
        home: str | os.PathLike[str] | None = None,
        quiet: bool = False,
    ) -> None:
        self.project = project
        self.run_name = run_name
        self.port = port
        self.home = home
        self.quiet = quiet
        self.commands = CommandRegistry()
        self.state: RunState = "running"
        self._server: SessionServer | None = None
        self.active = False
        """Whether this process serves the session (global rank 0, between open and close);
        an attribute, not a property: it is read several times per step."""
        self.inbox: FlaggedQueue[PendingCommand] = FlaggedQueue()
        """The server's inbox while it runs (else one that stays empty): the batch boundary
        reads ``inbox.waiting`` to know whether commands wait."""
        self._workdir: Path | None = None
        self._quiet_hooks: list[Callable[[], None]] = []
        self._listeners: dict[str, list[Callable[[list[dict[str, Any]]], None]]] = {}
        self.ranks = RankSync(self)
        """The control rounds of a distributed run (inactive with a single process)."""
        self._sigterm = SigtermHandler()

    @property
    def server(self) -> SessionServer | None:
        """The running server, or ``None`` on other ranks and outside the run."""
        return self._server

    @property
    def workdir(self) -> Path:
        """The run's temporary folder (per-sample history, snapshots), created on first use.

        Sessions are ephemeral: it is removed when the session closes; an export copies
        what it needs out of it first.
        """
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="onthefly-"))
        return self._workdir

    def open(self, trainer: TrainerHost) -> None:
        """Start the server on global rank 0; a second call is a no-op.

        In a distributed run every rank must call it (the ranks form their control group).
        From here until :meth:`close`, SIGTERM ends the run as Ctrl+C does (see
        :mod:`onthefly.callbacks._termination`), where the script has not claimed it.
        """
        self._sigterm.install()
        self.ranks.start(trainer)
        if self._server is not None or not trainer.is_global_zero:
            return
        from onthefly.server import SessionServer

        name = self.run_name or time.strftime("run-%Y%m%d-%H%M%S")
        server = SessionServer(self.project, name, port=self.port, home=self.home, quiet=self.quiet)
        self._server = server.start()
        self.active, self.inbox = True, server.inbox
        self.state = "running"

    def close(self, trainer: TrainerHost, reason: str) -> None:
        """Announce the end of the run and shut the server down (removes the discovery file).

        Raises:
            Terminated: a SIGTERM came while closing (raised once the close is done).
        """
        with self._sigterm.closing():
            server = self._server
            if server is None:
                self._remove_workdir()
                return
            try:
                self.quiesce()
                self.set_state("finished", trainer, reason)
            finally:
                self._server, self.active, self.inbox = None, False, FlaggedQueue()
                server.close()
                self._remove_workdir()

    def _remove_workdir(self) -> None:
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def on_quiet(self, hook: Callable[[], None]) -> None:
        """Call ``hook`` whenever the run goes quiet (pause, test, end), e.g. to flush telemetry."""
        self._quiet_hooks.append(hook)

    def quiesce(self) -> None:
        """Run the quiet hooks: everything buffered so far reaches the server."""
        for hook in self._quiet_hooks:
            hook()

    def listen(self, kind: str, listener: Callable[[list[dict[str, Any]]], None]) -> None:
        """Also hand the fields of every published ``kind`` event to ``listener``, on the
        publishing thread (e.g. the host values Telemetry ships, without another host sync):
        a list of them per :meth:`publish` or :meth:`publish_all`, oldest first."""
        self._listeners.setdefault(kind, []).append(listener)

    def publish(self, event: EventBody) -> None:
        """Send one event of the main run; a no-op when the session is not active.

        Example:
            >>> session.publish(EpochBody(epoch=1, step=120))  # doctest: +SKIP
        """
        self.publish_all((event,))

    def publish_all(self, events: Sequence[EventBody]) -> None:
        """Send several events of one kind of the main run, in order (the steps Telemetry
        ships together); a no-op when the session is not active.

        Raises:
            ConfigurationError: the events are of more than one kind.
        """
        server = self._server
        if server is not None and events:
            server.publish_all(server.main_run, events)
            listeners = self._listeners.get(events[0].type)
            if listeners:
                fields = [event.__dict__ for event in events]
                for listener in listeners:
                    listener(fields)

    def publish_fields(self, kind: str, fields: Sequence[dict[str, Any]]) -> None:
        """Send several events of one kind given as their fields (the server's pump validates
        them as it numbers them); its listeners are not told: a publisher that uses this
        tells its readers itself (Telemetry's shipped steps). A no-op when not active."""
        server = self._server
        if server is not None and fields:
            server.publish_fields(server.main_run, kind, fields)

    def has_clients(self) -> bool:
        """Whether a dashboard or client is connected right now."""
        server = self._server
        return server is not None and server.has_clients()

    def set_state(self, state: RunState, trainer: TrainerHost, reason: str | None = None) -> None:
        """Record the run's state and publish a ``status`` event with the current step."""
        self.state = state
        self.publish(
            StatusBody(
                state=state,
                step=int(trainer.global_step),
                epoch=int(trainer.current_epoch),
                reason=reason,
            )
        )

    def position(self, trainer: TrainerHost) -> dict[str, Any]:
        """The state, step and epoch, as command replies carry them."""
        return {
            "state": self.state,
            "step": int(trainer.global_step),
            "epoch": int(trainer.current_epoch),
        }

    def drain(self, boundary: Boundary) -> None:
        """Run every command already waiting in the inbox; never blocks."""
        # A command may close the session (and so replace the inbox): look again each time.
        while self.inbox.waiting:
            try:
                cmd = self.inbox.get_nowait()
            except queue.Empty:
                return
            self.commands.dispatch(boundary, cmd)

    def take_commands(self, wait: bool = False) -> list[PendingCommand]:
        """Take every command waiting in the inbox without running it.

        Args:
            wait: when none is waiting, wait up to one slice for the first.
        """
        # Without a server the inbox stays empty: a wait then takes its slice and finds none.
        inbox, taken = self.inbox, []
        try:
            if wait:
                taken.append(inbox.get(timeout=WAIT_SLICE_S))
            while inbox.waiting:
                taken.append(inbox.get_nowait())
        except queue.Empty:
            pass
        return taken

    def next_command(self) -> PendingCommand | None:
        """The next command of the inbox, waiting for it up to one slice (``None``: none
        came, or no server)."""
        if self._server is None:
            return None
        try:
            return self.inbox.get(timeout=WAIT_SLICE_S)
        except queue.Empty:
            return None
