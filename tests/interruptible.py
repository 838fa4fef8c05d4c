"""Start a child process that a test will interrupt, with Ctrl+C as a terminal delivers it.

A process inherits an *ignored* SIGINT from its parent: ``nohup make test``, a background
job and some CI runners start the suite that way, and Python then never raises
``KeyboardInterrupt`` in the children either. A test that sends SIGINT to a process it starts
runs the child through this module, which restores the default handler in the child itself
(no ``preexec_fn``: the test process has threads, and code between fork and exec could
deadlock on a lock one of them held)::

    python -m tests.interruptible -m onthefly watch     # a module, like python -m
    python -m tests.interruptible examples/demo.py      # a script

:func:`command` builds such an argument list.
"""

from __future__ import annotations

import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def command(*argv: str, python_flags: tuple[str, ...] = ()) -> list[str]:
    """``[python, *python_flags, -m, tests.interruptible, *argv]``; run it with ``cwd`` or
    ``PYTHONPATH`` at the repository root so that ``tests`` is importable."""
    return [sys.executable, *python_flags, "-m", "tests.interruptible", *argv]


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if argv[:1] == ["-m"] and len(argv) > 1:
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv:
        sys.argv = list(argv)
        sys.path[0] = str(Path(argv[0]).resolve().parent)
        runpy.run_path(argv[0], run_name="__main__")
    else:
        raise SystemExit("usage: python -m tests.interruptible (-m MODULE | SCRIPT) [ARGS...]")


if __name__ == "__main__":
    main(sys.argv[1:])
