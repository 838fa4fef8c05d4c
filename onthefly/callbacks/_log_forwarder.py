"""Forward the run's Python log records and warnings to the session as ``log`` events.

A handler on the root logger sees every record that propagates there at or above its
level; a ``warnings.showwarning`` wrapper sees every warning the filters let through and
still shows it as before. Both are installed when the run starts and removed when it ends.
Records of the session server and of ``websockets`` are never forwarded: sending them
would log again, without end.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from onthefly.protocol import LogBody, LogLevel, LogRecord

_OWN_LOGGERS = ("onthefly.server", "websockets")
_MAX_MESSAGE = 10_000
_LEVELS: tuple[tuple[int, LogLevel], ...] = (
    (logging.CRITICAL, "CRITICAL"),
    (logging.ERROR, "ERROR"),
    (logging.WARNING, "WARNING"),
)


def level_name(levelno: int) -> LogLevel:
    """The protocol's level for a ``logging`` level number (custom levels round down)."""
    for threshold, name in _LEVELS:
        if levelno >= threshold:
            return name
    return "INFO" if levelno >= logging.INFO else "DEBUG"


class LogForwarder(logging.Handler):
    """Sends log records and warnings to ``publish(LogBody(...))``.

    Args:
        publish: sends one ``log`` event; may be called from any thread.
        level: the lowest level forwarded (name or number).
    """

    def __init__(self, publish: Callable[[LogBody], None], level: int | str = logging.INFO) -> None:
        super().__init__(level.upper() if isinstance(level, str) else level)
        self._publish = publish
        self._busy = threading.local()
        self._previous_showwarning: Callable[..., Any] | None = None

    def install(self) -> None:
        """Attach to the root logger and hook warnings; a second call is a no-op."""
        if self._previous_showwarning is not None:
            return
        logging.getLogger().addHandler(self)
        self._previous_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning

    def uninstall(self) -> None:
        """Detach from logging and restore ``warnings.showwarning`` (if nobody replaced ours)."""
        previous, self._previous_showwarning = self._previous_showwarning, None
        if previous is None:
            return
        logging.getLogger().removeHandler(self)
        if warnings.showwarning == self._showwarning:
            warnings.showwarning = previous

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(_OWN_LOGGERS):
            return
        message = record.getMessage()
        if record.exc_info:
            message = f"{message}\n{logging.Formatter().formatException(record.exc_info)}"
        self._send(record.created, level_name(record.levelno), record.name, message)

    def _showwarning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        text = f"{category.__name__}: {message} ({filename}:{lineno})"
        self._send(time.time(), "WARNING", "py.warnings", text)
        previous = self._previous_showwarning
        if previous is None:
            return
        # The previous hook may log the warning (logging.captureWarnings): that record is a twin.
        self._busy.active = True
        try:
            previous(message, category, filename, lineno, file, line)
        finally:
            self._busy.active = False

    def _send(self, created: float, level: LogLevel, logger: str, message: str) -> None:
        if getattr(self._busy, "active", False):
            return
        self._busy.active = True  # a record logged while publishing must not come back here
        try:
            record = LogRecord(
                time=created, level=level, logger=logger, message=message[:_MAX_MESSAGE]
            )
            self._publish(LogBody(record=record))
        except Exception:  # a log line that cannot be sent is dropped; the run goes on
            pass
        finally:
            self._busy.active = False
