"""Exported sessions (``.otf`` files) in the hub's folder, served read-only like a live run.

The folder is looked at again every few seconds (files added, changed or removed). Only a
file's manifest is read when it is found (project, run, size); its history is loaded the
first time a tab opens it, into a read-only :class:`~onthefly.server.broker.Broker` — the
same view ``onthefly view FILE`` gives, without a process per file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from onthefly.errors import OnTheFlyError
from onthefly.server.broker import Broker
from onthefly.sessions.archive import SessionArchive
from onthefly.sessions.view import as_finished, read_history, read_only_message

log = logging.getLogger(__name__)

SUFFIX = ".otf"


@dataclass(frozen=True)
class Stamp:
    """What tells a file changed: its size and modification time."""

    size: int
    mtime: float


class SessionFileEntry:
    """One exported session of the folder.

    Args:
        path: the file.
        relative: its path relative to the folder (how the hub names it).
        project: the project its manifest names.
        run: the run its manifest names.
        stamp: its size and modification time when found.
    """

    def __init__(self, path: Path, relative: str, project: str, run: str, stamp: Stamp) -> None:
        self.path = path
        self.relative = relative
        self.project = project
        self.run = run
        self.stamp = stamp
        self._broker: Broker | None = None
        self._lock = threading.Lock()

    @property
    def key(self) -> str:
        """``file-<hash>``: stable for a path, safe in a URL."""
        return "file-" + hashlib.sha256(self.relative.encode()).hexdigest()[:12]

    def broker(self) -> Broker | None:
        """The file's history as a read-only broker, loaded on first use (``None``: the file
        cannot be read, or holds no history)."""
        with self._lock:
            if self._broker is None:
                self._broker = self._load()
            return self._broker

    def _load(self) -> Broker | None:
        try:
            manifest, saved = read_history(self.path)
        except (OnTheFlyError, OSError, ValueError) as exc:  # ValueError: invalid history
            log.warning("hub: cannot load %s: %s", self.path, exc)
            return None
        if saved is None or not saved.runs:
            return None
        main = next((run.run for run in saved.runs if run.parent is None), saved.runs[0].run)
        broker = Broker(
            f"file-{saved.session}",
            manifest.project,
            main_run=main,
            read_only=read_only_message(self.path),
        )
        broker.preload(as_finished(saved, main))
        return broker


def scan_folder(folder: Path, known: dict[str, SessionFileEntry]) -> dict[str, SessionFileEntry]:
    """The session files under ``folder`` (recursively), by relative path.

    Entries of ``known`` whose file is unchanged are kept as they are (their loaded history
    too); new or changed files get a fresh entry; files that are not session files are left
    out (reported once at DEBUG).
    """
    found: dict[str, SessionFileEntry] = {}
    for path in sorted(folder.rglob(f"*{SUFFIX}")) if folder.is_dir() else []:
        try:
            status = path.stat()
        except OSError:
            continue
        relative = path.relative_to(folder).as_posix()
        stamp = Stamp(status.st_size, status.st_mtime)
        previous = known.get(relative)
        if previous is not None and previous.stamp == stamp:
            found[relative] = previous
            continue
        try:
            with SessionArchive(path) as archive:
                manifest = archive.manifest
        except (OnTheFlyError, OSError) as exc:
            log.debug("hub: %s is not a readable session file: %s", path, exc)
            continue
        found[relative] = SessionFileEntry(path, relative, manifest.project, manifest.run, stamp)
    return found


def folder_of(logdir: str | os.PathLike[str] | None) -> Path | None:
    """The folder of exported sessions, resolved (``None``: none)."""
    return None if logdir is None else Path(logdir).expanduser().resolve()
