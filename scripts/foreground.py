"""Run a command as the terminal's foreground job: ``python scripts/foreground.py CMD ARGS``.

``make demo`` runs the demo under make. A terminal's Ctrl+C signals the whole foreground
process group, make included, and make then reports the recipe as interrupted
(``make: *** [demo] Interrupt``) although the demo caught the Ctrl+C and ended cleanly. This
wrapper moves the command into a process group of its own and hands it the terminal, as a
shell does for a job, so that Ctrl+C reaches the command alone; the terminal goes back to
make's group afterwards. The exit status is the command's (``128 + N`` for signal N).
Without a controlling terminal it just runs the command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python scripts/foreground.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    try:
        tty = os.open("/dev/tty", os.O_RDWR)
    except OSError:  # no controlling terminal: nothing to hand over
        return subprocess.call(argv)
    try:
        ours = os.tcgetpgrp(tty)
        # A background group that changes the terminal's foreground gets SIGTTOU: ignored here.
        signal.signal(signal.SIGTTOU, signal.SIG_IGN)

        def take_the_terminal() -> None:
            # In the child, before the command starts (as a shell does in both processes): a
            # Ctrl+C typed as soon as the command runs must already reach its group alone.
            # (This script has no threads, so code between fork and exec is safe here.)
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, os.getpgrp())
            signal.signal(signal.SIGTTOU, signal.SIG_DFL)  # the command gets the default

        child = subprocess.Popen(argv, process_group=0, preexec_fn=take_the_terminal)
        with contextlib.suppress(OSError):
            os.tcsetpgrp(tty, child.pid)
        try:
            code = child.wait()
        finally:
            with contextlib.suppress(OSError):
                os.tcsetpgrp(tty, ours)
    finally:
        os.close(tty)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
