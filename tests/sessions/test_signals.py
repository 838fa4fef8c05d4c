"""A Ctrl+C (or SIGTERM) while torch writes or reads a session file's member is raised once
torch is done, not turned into torch's error."""

from __future__ import annotations

import os
import signal
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from onthefly.sessions import archive as archive_module
from onthefly.sessions.archive import SessionArchive
from onthefly.sessions.signals import signals_deferred
from onthefly.sessions.writer import ArchiveWriter
from tests.sessions.test_archive import MODEL, good_file, manifest


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT as a terminal gives it to a script, whatever the test runner inherited."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.05)  # the handler runs at the next bytecode: inside, were it not held


def test_a_ctrl_c_inside_is_raised_when_the_block_ends(ctrl_c_raises: None) -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt), signals_deferred():
        ctrl_c()
        reached.append(True)
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_script_s_own_handler_gets_the_signal_after_the_block() -> None:
    got: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            assert got == []
        assert got == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_ignored_signals_stay_ignored_and_other_threads_change_nothing() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with signals_deferred():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        seen: list[Any] = []

        def elsewhere() -> None:
            with signals_deferred():  # signal.signal would raise outside the main thread
                seen.append(signal.getsignal(signal.SIGINT))

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        assert seen == [signal.SIG_IGN]
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_third_call(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> None:
    """A Ctrl+C that lands in the third call of ``owner.name``, which torch's C++ side makes
    (from there on an exception would come out of torch as a ``RuntimeError``)."""
    method = getattr(owner, name)
    calls: list[int] = []

    def interrupted(self: Any, *args: Any) -> Any:
        calls.append(1)
        if len(calls) == 3:
            ctrl_c()
        return method(self, *args)

    monkeypatch.setattr(owner, name, interrupted)


def test_a_ctrl_c_during_a_tensor_write_ends_the_export_as_a_ctrl_c(
    tmp_path: Path, ctrl_c_raises: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupt_third_call(monkeypatch, zipfile._ZipWriteFile, "write")  # type: ignore[attr-defined]
    target = tmp_path / "run.otf"
    with pytest.raises(KeyboardInterrupt), ArchiveWriter(target) as writer:
        writer.add_torch(MODEL, {"w": torch.randn(64, 64), "b": torch.randn(64)})
        writer.commit(manifest())
    assert list(tmp_path.iterdir()) == []  # neither the file nor its temporary one


def test_a_ctrl_c_during_a_tensor_load_is_not_a_corrupt_file(
    tmp_path: Path, ctrl_c_raises: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SessionArchive(good_file(tmp_path / "a.otf")) as archive:
        with monkeypatch.context() as patch:
            interrupt_third_call(patch, archive_module._Window, "readinto")
            with pytest.raises(KeyboardInterrupt):
                archive.load_torch(MODEL)
        assert torch.equal(archive.load_torch(MODEL)["w"], torch.arange(1000.0))
