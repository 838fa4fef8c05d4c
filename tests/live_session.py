"""A real session server whose control commands are answered by a stand-in training thread.

Used by the client and CLI tests: the server, websockets and discovery files are real; only
the model is missing. The stand-in answers ``pause``/``resume``/``stop``/``test`` the way
the training loop does (state change published as a ``status`` event, reply with ``step``).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from onthefly.protocol import (
    MetricsBody,
    Position,
    RunState,
    StatusBody,
    TestOutcome,
    TestResultBody,
)
from onthefly.server.discovery import sessions_dir
from onthefly.server.pending import PendingCommand
from onthefly.server.session_server import SessionServer


class Training:
    """Answers the server's inbox on its own thread; the test drives steps with :meth:`train`."""

    def __init__(self, server: SessionServer) -> None:
        self.server = server
        self.run = server.main_run
        self.step = 0
        self.epoch = 0
        self.state: RunState = "running"
        self.tests = 0
        self.hold = False
        """While true, control commands are kept unanswered in :attr:`held`."""
        self.held: list[PendingCommand] = []
        self.got_command = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-training", daemon=True)
        self._thread.start()

    def train(self, steps: int) -> None:
        """Publish ``steps`` train metrics (loss = 1/step)."""
        for _ in range(steps):
            self.step += 1
            values = {"loss": 1.0 / self.step, "acc": None}
            self.server.publish(
                self.run, MetricsBody(step=self.step, epoch=self.epoch, values=values)
            )

    def finish(self) -> None:
        self._set_state("finished", reason="max_steps reached")

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _set_state(self, state: RunState, reason: str | None = None) -> None:
        self.state = state
        self.server.publish(
            self.run, StatusBody(state=state, step=self.step, epoch=self.epoch, reason=reason)
        )

    def _where(self) -> Position:
        return Position(state=self.state, step=self.step, epoch=self.epoch)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                pending = self.server.inbox.get(timeout=0.02)
            except queue.Empty:
                continue
            if self.hold:
                self.held.append(pending)
            else:
                self._answer(pending)
            self.got_command.set()

    def _answer(self, pending: PendingCommand) -> None:
        command = pending.command
        if command.type == "pause":
            self._set_state("paused", reason="pause command")
            pending.reply(self._where())
        elif command.type == "resume":
            if self.state != "paused":
                pending.fail("invalid_state", f"the run is {self.state}; expected paused")
                return
            self._set_state("running", reason="resume command")
            # A stand-in with no limits to report: its resume and stop say where it is only.
            pending.relay(self._where().model_dump())
        elif command.type == "stop":
            self._set_state("finished", reason="stop command")
            pending.relay(self._where().model_dump())
        else:  # test
            self.tests += 1
            label = getattr(command, "label", None) or f"test_{self.tests}"
            outcome = TestOutcome(
                label=label, step=self.step, loss=0.25, metrics={"test_acc": 0.75}, duration=0.5
            )
            self.server.publish(self.run, TestResultBody(**dict(outcome)))
            pending.reply(outcome)


@contextmanager
def live_session(project: str = "mnist", run: str = "baseline") -> Iterator[Training]:
    """A started server (port 0, quiet) with a stand-in training thread; both always closed."""
    server = SessionServer(project, run, port=0, quiet=True).start()
    training = Training(server)
    try:
        yield training
    finally:
        training.close()
        server.close()


def session_file(training: Training) -> Path:
    """The discovery file the server wrote."""
    (path,) = sessions_dir().glob(f"*-{training.server.port}.json")
    return path
