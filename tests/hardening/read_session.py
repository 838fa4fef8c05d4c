"""Read a session file as ``onthefly inspect`` or ``onthefly view`` does; print the memory.

Usage: ``python -m tests.hardening.read_session inspect|view PATH [LIMITS-JSON]``. Prints,
as JSON, the process's memory (RSS) before the read, its peak during the read (Linux: the
peak is reset first, so importing does not count), and the ``SessionFileError`` if the
file was refused. Imports nothing but what those commands import.
"""

from __future__ import annotations

import json
import sys

from onthefly.errors import SessionFileError
from onthefly.sessions import summary, view
from onthefly.sessions.archive import Limits


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(field + ":"))
    return int(line.split()[1]) << 10


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    limits = Limits(**json.loads(sys.argv[3])) if len(sys.argv) > 3 else Limits()
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak RSS starts again from here
    before = _status("VmRSS")
    error = None
    try:
        if mode == "inspect":
            summary.summarize(path, limits=limits)
        else:
            view.serve(path, port=0, quiet=True, limits=limits).close()
    except SessionFileError as exc:
        error = str(exc)
    print(json.dumps({"before": before, "peak": _status("VmHWM"), "error": error}))


if __name__ == "__main__":
    main()
