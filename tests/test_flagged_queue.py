"""FlaggedQueue: ``waiting`` is up whenever an item waits, also when a put races a take."""

from __future__ import annotations

import queue

import pytest

from onthefly.flagged_queue import FlaggedQueue


def test_waiting_follows_the_items() -> None:
    inbox: FlaggedQueue[int] = FlaggedQueue()
    assert not inbox.waiting and inbox.empty()
    inbox.put(1)
    inbox.put(2)
    assert inbox.waiting and inbox.qsize() == 2
    assert inbox.get_nowait() == 1
    assert inbox.waiting  # one is left
    assert inbox.get(timeout=1) == 2
    assert not inbox.waiting and inbox.empty()
    with pytest.raises(queue.Empty):
        inbox.get_nowait()
    with pytest.raises(queue.Empty):
        inbox.get(timeout=0.01)


class _PutDuringLook:
    """The inner queue, with another thread's put landing right after the taker's look at
    it (the worst moment): the look's answer is already stale when it returns."""

    def __init__(self, inbox: FlaggedQueue[int]) -> None:
        self._inbox, self._inner = inbox, inbox._queue
        self.raced = False

    def empty(self) -> bool:
        answer = self._inner.empty()
        if not self.raced:
            self.raced = True
            self._inbox.put(99)  # as the server thread would, between two bytecodes
        return answer

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_put_racing_with_the_last_take_leaves_the_flag_up() -> None:
    # The training thread takes commands only when it sees the flag: an item must never
    # wait with the flag down.
    inbox: FlaggedQueue[int] = FlaggedQueue()
    inbox.put(1)
    racing = _PutDuringLook(inbox)
    inbox._queue = racing  # type: ignore[assignment]
    assert inbox.get_nowait() == 1
    assert racing.raced and inbox.qsize() == 1
    assert inbox.waiting
    assert inbox.get_nowait() == 99 and not inbox.waiting
