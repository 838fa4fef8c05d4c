"""A live line on the terminal while a command that takes seconds waits for its answer.

``compare``, ``merge``, ``scan``, ``fork``, ``test`` and ``health`` run in the training
process and answer when done: on a terminal the CLI shows that it waits, with the seconds
so far, on stderr, and clears the line when the answer comes. Piped or redirected, it
prints nothing.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

GRACE_S = 0.5
"""No line for answers quicker than this."""

INTERVAL_S = 0.25


class Waiting:
    """Shows ``label … N s`` on ``stream`` while the ``with`` body runs, if it is a terminal.

    Args:
        label: what runs, e.g. ``"compare: evaluating in the training process"``.
        stream: where the line goes (default stderr).

    Example:
        >>> with Waiting("scan: evaluating val"):  # doctest: +SKIP
        ...     data = client.scan("val")
    """

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._shown = False

    def __enter__(self) -> Waiting:
        if _is_terminal(self.stream):
            self._thread = threading.Thread(target=self._run, name="onthefly-waiting", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        if self._shown:
            self.stream.write("\r\033[K")  # the answer is printed on a clean line
            self.stream.flush()

    def _run(self) -> None:
        started = time.monotonic()
        if self._done.wait(GRACE_S):
            return
        while not self._done.is_set():
            self.stream.write(f"\r{self.label} … {time.monotonic() - started:.0f} s\033[K")
            self.stream.flush()
            self._shown = True
            self._done.wait(INTERVAL_S)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed or detached
        return False
