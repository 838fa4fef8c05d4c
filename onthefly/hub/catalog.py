"""Every run the hub knows: live sessions (mirrored), ended ones (kept), exported files.

:meth:`Catalog.refresh` is called about once a second: a discovery file that appeared gets
a :class:`~onthefly.hub.mirror.Mirror`; one that disappeared (its process ended) ends its
mirror, which stays listed, read-only, until :data:`KEEP_ENDED` newer ended ones push it out.
The exported sessions of the hub's folder are looked at every few refreshes.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from onthefly.hub.files import SessionFileEntry, scan_folder
from onthefly.hub.mirror import Mirror
from onthefly.server.broker import Broker
from onthefly.server.discovery import list_sessions

KEEP_ENDED = 100
"""Ended sessions kept (the most recent ones); older ones are forgotten."""

FOLDER_EVERY = 5
"""Refreshes between two looks at the folder of exported sessions."""

READY_TIMEOUT = 5.0
"""Seconds a tab waits, at most, for a session's first snapshot to reach the hub."""


class Catalog:
    """The live, ended and exported sessions the hub serves.

    Args:
        home: the OnTheFly home whose discovery folder lists the live sessions.
        folder: a folder of exported sessions (``.otf``), or ``None``.
        keep_ended: ended sessions kept.

    Example:
        >>> catalog = Catalog(None, None)
        >>> catalog.refresh(); catalog.listing()  # doctest: +SKIP
        [{'key': '4242-47621', 'project': 'mnist', 'run': 'baseline', 'live': True, ...}]
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None,
        folder: Path | None,
        keep_ended: int = KEEP_ENDED,
    ) -> None:
        self._home = home
        self._folder = folder
        self._keep_ended = keep_ended
        self._mirrors: dict[str, Mirror] = {}
        self._files: dict[str, SessionFileEntry] = {}
        self._lock = threading.Lock()
        self._refreshes = 0
        self._closed = False

    def refresh(self) -> None:
        """Follow the sessions that appeared, end the ones whose process ended."""
        live = {f"{s.pid}-{s.port}": s for s in list_sessions(self._home)}
        with self._lock:
            if self._closed:
                return
            started = [Mirror(s) for key, s in live.items() if key not in self._mirrors]
            for mirror in started:
                self._mirrors[mirror.key] = mirror
            gone = [m for key, m in self._mirrors.items() if m.live and key not in live]
        for mirror in started:
            mirror.start()
        for mirror in gone:
            mirror.end()
        self._forget_old()
        if self._folder is not None and self._refreshes % FOLDER_EVERY == 0:
            files = scan_folder(self._folder, self._files)
            with self._lock:
                self._files = files
        self._refreshes += 1

    def broker(self, key: str) -> Broker | None:
        """The broker a tab of session ``key`` talks to (``None``: unknown or unreadable)."""
        with self._lock:
            mirror = self._mirrors.get(key)
            entry = next((f for f in self._files.values() if f.key == key), None)
        if mirror is not None:
            mirror.wait_ready(READY_TIMEOUT)
            return mirror.broker
        return entry.broker() if entry is not None else None

    def listing(self) -> list[dict[str, Any]]:
        """What the hub's page lists: live sessions, ended ones, then exported files."""
        with self._lock:
            mirrors = list(self._mirrors.values())
            files = list(self._files.values())
        mirrors.sort(key=lambda m: (not m.live, -m.session.started_at))
        rows: list[dict[str, Any]] = [
            {
                "key": m.key,
                "kind": "session",
                "project": m.session.project,
                "run": m.session.run,
                "pid": m.session.pid,
                "port": m.session.port,
                "session": m.session.session,
                "started_at": m.session.started_at,
                "live": m.live,
                "ended_at": m.ended_at,
                "path": f"/ws/{m.key}",
            }
            for m in mirrors
        ]
        rows += [
            {
                "key": f.key,
                "kind": "file",
                "project": f.project,
                "run": f.run,
                "file": f.relative,
                "started_at": f.stamp.mtime,
                "live": False,
                "ended_at": f.stamp.mtime,
                "path": f"/ws/{f.key}",
            }
            for f in files
        ]
        return rows

    def close(self) -> None:
        """Stop following every session."""
        with self._lock:
            self._closed = True
            mirrors = list(self._mirrors.values())
        for mirror in mirrors:
            mirror.close()

    def _forget_old(self) -> None:
        with self._lock:
            ended = sorted(
                (m for m in self._mirrors.values() if not m.live),
                key=lambda m: m.ended_at or time.time(),
            )
            old = ended[: max(0, len(ended) - self._keep_ended)]
            for mirror in old:
                del self._mirrors[mirror.key]
        for mirror in old:
            mirror.close()
