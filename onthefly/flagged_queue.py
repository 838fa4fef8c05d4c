"""A queue with a flag: the training thread's inbox of control commands, read per step.

The server's threads put commands in; the training thread looks at
:attr:`FlaggedQueue.waiting` at every batch boundary, a plain attribute read rather than a
call (that look happens several times per step), and takes the commands only when it is set.
"""

from __future__ import annotations

import queue
from typing import Generic, TypeVar

ItemT = TypeVar("ItemT")


class FlaggedQueue(Generic[ItemT]):
    """A thread-safe FIFO queue (``queue.SimpleQueue``) with a ``waiting`` flag.

    ``waiting`` is ``True`` whenever an item is in the queue (at worst it is still ``True``
    for a moment after the last one was taken: a look that finds nothing is harmless, one
    that misses an item is not). Taking clears the flag before it looks at the queue again,
    so a put racing with the take always leaves it set.

    Example:
        >>> inbox = FlaggedQueue()
        >>> inbox.put("pause"); inbox.waiting
        True
        >>> inbox.get_nowait(), inbox.waiting
        ('pause', False)
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[ItemT] = queue.SimpleQueue()
        self.waiting = False

    def put(self, item: ItemT) -> None:
        """Add ``item`` (from any thread; never blocks)."""
        self._queue.put(item)
        self.waiting = True

    def get(self, timeout: float | None = None) -> ItemT:
        """Take the first item, waiting up to ``timeout`` seconds for one.

        Raises:
            queue.Empty: none came in time.
        """
        return self._settled(self._queue.get(timeout=timeout))

    def get_nowait(self) -> ItemT:
        """Take the first item.

        Raises:
            queue.Empty: the inbox is empty.
        """
        return self._settled(self._queue.get_nowait())

    def empty(self) -> bool:
        """Whether no item is waiting."""
        return self._queue.empty()

    def qsize(self) -> int:
        """How many items are waiting."""
        return self._queue.qsize()

    def _settled(self, item: ItemT) -> ItemT:
        self.waiting = False  # first, then the look: a put in between sets it again
        if not self._queue.empty():
            self.waiting = True
        return item
