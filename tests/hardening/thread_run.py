"""The hardening training on a thread of the test's own process, always stopped.

A run left training here, after a failed check, would go on drawing from the global RNG
under every later test (their bit-for-bit comparisons fail) and keep pytest from exiting.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from onthefly.server.discovery import SessionFile
from tests.callbacks.live import wait_for_session
from tests.hardening.training import fit
from tests.hardening.wire import Wire


@contextmanager
def live_run(home: Path, folder: Path, step_sleep: float = 0.005) -> Iterator[SessionFile]:
    """A native run on a thread of this process; stopped on the way out, also when the
    test failed or already stopped it, and checked to have ended."""
    run = threading.Thread(
        target=fit, args=(folder,), kwargs={"step_sleep": step_sleep}, name="training"
    )
    run.start()
    try:
        session = wait_for_session(home)
        yield session
    finally:
        with contextlib.suppress(Exception):  # the run may have ended already
            control = Wire(session)
            control.call("stop")
            control.close()
        run.join(timeout=60)
    assert not run.is_alive()
