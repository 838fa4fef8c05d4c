"""A control command waiting for the training thread, and its single answer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, get_args

from pydantic_core import PydanticSerializationError

from onthefly.errors import ConfigurationError
from onthefly.protocol import SERVER_MESSAGE, Command, ErrorCode, ErrorInfo, ErrorReply, Reply

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
        ...         pending.reply(state="paused", step=trainer.global_step)
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

    def reply(self, **data: Any) -> None:
        """Answer with success; ``data`` (JSON-serialisable values) becomes the reply's data.

        Example:
            >>> pending.reply(state="paused", step=120, epoch=2)  # doctest: +SKIP
        """
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
