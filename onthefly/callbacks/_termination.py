"""SIGTERM ends a run as Ctrl+C does, and the process still ends by SIGTERM.

``docker stop``, systemd, SLURM and ``kill`` send SIGTERM, whose default action ends the
process at once: no ``finally``, no callback, so a live session's discovery file and its
temporary folder (with the checkpoint ring's weights) stayed behind. While a session is open
on the main thread, :class:`SigtermHandler` handles SIGTERM instead, where nothing else does:

* The first SIGTERM raises :class:`~onthefly.errors.Terminated` in the training thread, as
  Ctrl+C raises ``KeyboardInterrupt``: the run unwinds through the callbacks' clean-up
  (``on_exception``, ``teardown``) and the session closes. Further SIGTERMs during that
  clean-up are ignored.
* Left uncaught, the exception ends the program; at exit the process kills itself with
  SIGTERM, so whoever sent it sees a death by SIGTERM (status ``-15``, shell ``143``), as
  Python does with SIGINT.

Who owns the signal: a handler installed before the session opens (the script's own, or
``SIG_IGN``) is left in place and is what runs; OnTheFly installs nothing. A handler the
script installs while the run goes replaces OnTheFly's and is not replaced back. Lightning
composes its own SIGTERM handler with the one it finds when ``fit`` starts, so under Lightning
both run: Lightning's marks ``trainer.received_sigterm``, then OnTheFly's raises.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

from onthefly.errors import Terminated

log = logging.getLogger(__name__)


class SigtermHandler:
    """Handles SIGTERM for one open session (see the module's docstring for the rule).

    Example:
        >>> handler = SigtermHandler()
        >>> handler.install()  # doctest: +SKIP
        True
        >>> handler.restore()  # doctest: +SKIP
    """

    def __init__(self) -> None:
        self.installed = False
        self._fired = False
        self._deferring = False
        self._deferred = False

    def install(self) -> bool:
        """Handle SIGTERM from now on, if it has its default disposition and this is the
        main thread (only it may set handlers); ``True`` when installed."""
        if self.installed or threading.current_thread() is not threading.main_thread():
            return self.installed
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return False  # the script (or its launcher) owns SIGTERM
        signal.signal(signal.SIGTERM, self._handle)
        self.installed, self._fired = True, False
        _exit_by_sigterm_when_uncaught()
        return True

    def restore(self) -> None:
        """Give SIGTERM back its default disposition, unless something replaced ours."""
        if not self.installed:
            return
        self.installed = False
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) == self._handle:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)

    @contextlib.contextmanager
    def closing(self) -> Iterator[None]:
        """Around the session's close: a SIGTERM meanwhile waits for the close to finish
        (it is raised then), and the handler is restored at the end."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False
            deferred, self._deferred = self._deferred, False
            self.restore()
        if deferred:
            raise Terminated(signal.SIGTERM)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.installed:
            # Called after the session closed (Lightning puts back the handler it found when
            # fit started, ours): do what the default would.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if self._fired:
            log.warning("SIGTERM again: the run is already stopping")
            return
        self._fired = True
        if self._deferring:  # the session is closing: let it finish first
            self._deferred = True
            return
        raise Terminated(signum)


_exit_hook_registered = False


def _exit_by_sigterm_when_uncaught() -> None:
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(_exit_by_sigterm)
        _exit_hook_registered = True


def _exit_by_sigterm() -> None:
    # Python leaves the exception that ended the program in sys.last_value.
    if not isinstance(getattr(sys, "last_value", None), Terminated):
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    logging.shutdown()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
