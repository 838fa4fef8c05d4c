"""The SIGTERM handler of a session: raised as Ctrl+C is, only where nothing else handles it."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import pytest

from onthefly.callbacks._termination import SigtermHandler
from onthefly.errors import Terminated


@pytest.fixture(autouse=True)
def _default_sigterm() -> Iterator[None]:
    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    signal.signal(signal.SIGTERM, previous)


def test_sigterm_raises_terminated_once_then_is_ignored_until_restored() -> None:
    handler = SigtermHandler()
    assert handler.install()
    with pytest.raises(Terminated) as raised:
        signal.raise_signal(signal.SIGTERM)
    assert raised.value.signum == signal.SIGTERM
    assert "session was closed and its temporary files removed" in str(raised.value)
    signal.raise_signal(signal.SIGTERM)  # a second one while the run unwinds: ignored
    handler.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_handler_already_installed_is_left_in_place() -> None:
    def own(signum: int, frame: object) -> None:
        pass

    signal.signal(signal.SIGTERM, own)
    handler = SigtermHandler()
    assert not handler.install()
    assert signal.getsignal(signal.SIGTERM) is own
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert not SigtermHandler().install()


def test_a_handler_installed_during_the_run_is_not_replaced_back() -> None:
    def own(signum: int, frame: object) -> None:
        pass

    handler = SigtermHandler()
    assert handler.install()
    signal.signal(signal.SIGTERM, own)
    handler.restore()
    assert signal.getsignal(signal.SIGTERM) is own


def test_nothing_is_installed_from_another_thread() -> None:
    installed = []
    thread = threading.Thread(target=lambda: installed.append(SigtermHandler().install()))
    thread.start()
    thread.join()
    assert installed == [False]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_while_closing_waits_for_the_close_to_finish() -> None:
    handler = SigtermHandler()
    handler.install()
    closed = []
    with pytest.raises(Terminated), handler.closing():
        signal.raise_signal(signal.SIGTERM)
        closed.append(True)  # the close goes on
    assert closed == [True]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
