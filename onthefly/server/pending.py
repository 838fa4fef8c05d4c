"""A control command waiting for the training thread, and its single answer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import UnionType
from typing import Any, get_args

from pydantic_core import PydanticSerializationError

from onthefly.errors import ConfigurationError
from onthefly.protocol import (
    REPLIES,
    SERVER_MESSAGE,
    Command,
    ErrorCode,
    ErrorInfo,
    ErrorReply,
    Message,
    Reply,
    reply_fields,
)

Deliver = Callable[[Callable[[], bytes]], None]
_ERROR_CODES: tuple[str, ...] = get_args(ErrorCode)


class PendingCommand:
    """One control command (pause, resume, stop, test) taken from ``SessionServer.inbox``.

    The training thread acts on it at a batch boundary, then calls :meth:`reply` or
    :meth:`fail` once. Both are thread-safe and never block: the answer is serialised and
    sent by the client's sender thread. Only the first answer counts; later calls are
    ignored, so a command the server already answered with ``session_closed`` (at
    shutdown) or whose client left can still be answered without error.

    Attributes:
        command: the validated command (``command.type`` says which).
        run: the id of the targeted run (``command.run`` resolved; never ``None``).

    Example:
        >>> while not server.inbox.empty():  # doctest: +SKIP
        ...     pending = server.inbox.get_nowait()
        ...     if pending.command.type == "pause":
        ...         pending.reply(Position(state="paused", step=trainer.global_step, epoch=0))
        ...     else:
        ...         pending.fail("unsupported", f"{pending.command.type} is not supported here")
    """

    def __init__(
        self,
        command: Command,
        run: str,
        deliver: Deliver,
        on_answer: Callable[[PendingCommand], None] | None = None,
    ) -> None:
        self.command = command
        self.run = run
        self._deliver = deliver
        self._on_answer = on_answer
        self._lock = threading.Lock()
        self._answered = False

    @property
    def answered(self) -> bool:
        """Whether the command already got its answer."""
        return self._answered

    def reply(self, data: Message) -> None:
        """Answer with success: ``data`` is the command's reply model (``REPLIES[type]``).

        Example:
            >>> pending.reply(Position(state="paused", step=120, epoch=2))  # doctest: +SKIP

        Raises:
            ConfigurationError: ``data`` is not the reply model of this command's type.
        """
        expected = REPLIES[self.command.type]
        if not isinstance(data, expected):
            raise ConfigurationError(
                f"a {self.command.type!r} command is answered with {_names(expected)}; "
                f"got {type(data).__name__}"
            )
        self.relay(reply_fields(data))

    def relay(self, data: dict[str, Any]) -> None:
        """Answer with success with reply data already in wire form (the hub passes on a
        run's reply as the run wrote it)."""
        command_id = self.command.id
        self._answer(lambda: _render_reply(command_id, data))

    def fail(self, code: ErrorCode, message: str) -> None:
        """Answer with the error ``code`` and a message saying what was wrong.

        Example:
            >>> pending.fail("invalid_state", "the run is not paused")  # doctest: +SKIP

        Raises:
            ConfigurationError: ``code`` is not one of the protocol's error codes.
        """
        if code not in _ERROR_CODES:
            raise ConfigurationError(
                f"unknown error code {code!r}; expected one of {', '.join(_ERROR_CODES)}"
            )
        frame = ErrorReply(id=self.command.id, error=ErrorInfo(code=code, message=message))
        self._answer(lambda: SERVER_MESSAGE.dump_json(frame))

    def _answer(self, render: Callable[[], bytes]) -> None:
        with self._lock:
            if self._answered:
                return
            self._answered = True
        self._deliver(render)
        if self._on_answer is not None:
            self._on_answer(self)


def _render_reply(command_id: str, data: dict[str, Any]) -> bytes:
    try:
        return SERVER_MESSAGE.dump_json(Reply(id=command_id, data=data))
    except (PydanticSerializationError, ValueError, TypeError) as exc:
        error = ErrorInfo(
            code="internal",
            message=f"the reply could not be serialised ({exc}); expected JSON-compatible values",
        )
        return SERVER_MESSAGE.dump_json(ErrorReply(id=command_id, error=error))


def _names(expected: type | UnionType) -> str:
    members = get_args(expected) if isinstance(expected, UnionType) else (expected,)
    return " or ".join(member.__name__ for member in members)
