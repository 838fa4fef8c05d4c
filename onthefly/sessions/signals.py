"""Ctrl+C and SIGTERM wait while torch writes or reads through a Python file object.

``torch.save`` / ``torch.load`` on a file object (a member of a session file) call its
``write`` / ``read`` from C++, and an exception raised there comes out as torch's
``RuntimeError`` ("unexpected pos …"): the ``KeyboardInterrupt`` of a Ctrl+C, or the
:class:`~onthefly.errors.Terminated` of a SIGTERM, that lands in such a call would be lost —
a snapshot would be logged as failed and training would go on, a resume would report a
corrupt file. Inside :func:`signals_deferred` the Python handlers of SIGINT and SIGTERM only
note the signal; when the block ends they are put back and the first signal noted is handed
to its handler, which raises (or does whatever the script's own handler does) from there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

_DEFERRED: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM's Python handlers for the duration of the block.

    Only the main thread runs Python signal handlers (and may set them): in another thread
    this does nothing, since no handler can raise there. A signal left to the system's
    default (SIG_DFL: end the process) or ignored is left as it is.

    Example:
        >>> import io, torch
        >>> with signals_deferred():  # a Ctrl+C meanwhile raises after the block
        ...     torch.save({"w": torch.zeros(2)}, io.BytesIO())
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers: dict[int, Callable[[int, FrameType | None], Any]] = {}
    for deferred in _DEFERRED:
        handler = signal.getsignal(deferred)
        if callable(handler):
            handlers[deferred] = handler
    noted: list[tuple[int, FrameType | None]] = []

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append((signum, frame))

    for deferred in handlers:
        signal.signal(deferred, note)
    try:
        yield
    finally:
        for deferred, handler in handlers.items():
            signal.signal(deferred, handler)
        if noted:
            signum, frame = noted[0]
            handlers[signum](signum, frame)
