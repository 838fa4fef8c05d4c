"""The checkpoint ring: the last few snapshots of a run, in the session's temporary folder.

Each snapshot is a session file without history (``<folder>/<id>.otf``). The ring keeps at
most ``capacity`` snapshots and ``max_bytes`` of them together, dropping the oldest first;
a snapshot larger than ``max_bytes`` on its own is not kept. The folder goes away with the
session: snapshots are never meant to outlive the process (export to keep one).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from onthefly.errors import ConfigurationError


@dataclass(frozen=True)
class Entry:
    """One snapshot, as the ``checkpoints`` command lists it."""

    id: str
    step: int
    epoch: int
    reason: str
    time: float
    size: int

    def to_json(self) -> dict[str, Any]:
        """The entry as a JSON object."""
        return asdict(self)


class CheckpointRing:
    """A bounded list of snapshot files.

    Args:
        folder: where the files go (created on first use).
        capacity: most snapshots kept (``0`` keeps none).
        max_bytes: most bytes kept in all.

    Raises:
        ConfigurationError: a negative capacity or a non-positive byte bound.

    Example:
        >>> ring = CheckpointRing(Path("/tmp/ring"), capacity=3)  # doctest: +SKIP
        >>> ring.add(10, 0, "pause", lambda path: write(payload, path))  # doctest: +SKIP
    """

    def __init__(self, folder: Path, capacity: int = 3, max_bytes: int = 2 << 30) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ConfigurationError(f"checkpoints={capacity!r}; expected an int >= 0")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ConfigurationError(f"checkpoint_bytes={max_bytes!r}; expected an int > 0")
        self.folder = folder
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._entries: list[Entry] = []
        self._count = 0

    def entries(self) -> list[Entry]:
        """The snapshots, oldest first."""
        return list(self._entries)

    def path(self, entry_id: str) -> Path | None:
        """The file of snapshot ``entry_id``, or ``None`` if the ring has no such entry."""
        if any(entry.id == entry_id for entry in self._entries):
            return self.folder / f"{entry_id}.otf"
        return None

    def add(self, step: int, epoch: int, reason: str, write: Callable[[Path], int]) -> Entry | None:
        """Take a snapshot with ``write(path) -> size`` and trim the ring.

        Returns:
            The new entry, or ``None`` when the ring keeps nothing or the snapshot alone is
            over ``max_bytes``.
        """
        if self.capacity == 0:
            return None
        self.folder.mkdir(parents=True, exist_ok=True)
        self._count += 1
        entry_id = f"c{self._count}"
        size = write(self.folder / f"{entry_id}.otf")
        entry = Entry(entry_id, step, epoch, reason, time.time(), size)
        self._entries.append(entry)
        self._trim()
        return entry if entry in self._entries else None

    def _trim(self) -> None:
        while self._entries and (
            len(self._entries) > self.capacity
            or sum(e.size for e in self._entries) > self.max_bytes
        ):
            oldest = self._entries.pop(0)
            with contextlib.suppress(OSError):
                (self.folder / f"{oldest.id}.otf").unlink()
