"""The CLI's waiting line: shown on a terminal while a slow command runs, then cleared."""

from __future__ import annotations

import io
import re
import time

from onthefly.cli import waiting as _waiting
from onthefly.cli.waiting import Waiting


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_slow_answer_shows_the_seconds_then_a_clean_line() -> None:
    terminal = _Terminal()
    with Waiting("compare: evaluating", stream=terminal):
        time.sleep(_waiting.GRACE_S + 2 * _waiting.INTERVAL_S)
    shown = terminal.getvalue()
    assert re.match(r"\rcompare: evaluating … \d+ s\033\[K", shown), shown
    assert shown.endswith("\r\033[K")


def test_a_quick_answer_or_a_pipe_shows_nothing() -> None:
    terminal = _Terminal()
    with Waiting("scan", stream=terminal):
        pass
    assert terminal.getvalue() == ""
    piped = io.StringIO()
    with Waiting("scan", stream=piped):
        time.sleep(_waiting.GRACE_S + _waiting.INTERVAL_S)
    assert piped.getvalue() == ""
