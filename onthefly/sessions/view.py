"""``onthefly view``: an exported session's history served to the dashboard, read-only.

A :class:`~onthefly.server.SessionServer` is started in read-only mode with its history
preloaded from the file: every run shows as ``finished``, ``history``/``subscribe``/
``status`` work as for a live run, and control commands are answered ``unsupported`` with a
message naming the file. No model, no torch: only the file's JSON is read.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from onthefly.protocol import Snapshot
from onthefly.server import SessionServer
from onthefly.sessions.archive import Limits, SessionArchive
from onthefly.sessions.manifest import HISTORY, Manifest


def serve(
    path: str | os.PathLike[str],
    *,
    port: int | None = None,
    home: str | os.PathLike[str] | None = None,
    quiet: bool = False,
    limits: Limits | None = None,
) -> SessionServer:
    """Start a read-only session serving ``path``'s history; the caller closes it.

    Args:
        path: the session file.
        port: first port to try (``None``: ``ONTHEFLY_PORT`` or 47621; ``0``: any).
        home: OnTheFly home for the discovery file.
        quiet: do not print the dashboard's address.
        limits: the bounds the file must respect (default :class:`Limits`).

    Raises:
        SessionFileError: the file is not a readable session file.
        ConfigurationError: no free port.

    Example:
        >>> server = serve("run.otf", port=0)  # doctest: +SKIP
        >>> print(server.url); server.close()  # doctest: +SKIP
    """
    manifest, saved = read_history(path, limits)
    server = SessionServer(
        manifest.project,
        manifest.run,
        port=port,
        home=home,
        quiet=quiet,
        viewing=str(Path(path).resolve()),
        read_only=read_only_message(path),
    )
    if saved is not None:
        server.preload(as_finished(saved, server.main_run))
    return server.start()


def read_history(
    path: str | os.PathLike[str], limits: Limits | None = None
) -> tuple[Manifest, Snapshot | None]:
    """A session file's manifest and its saved history (``None``: the file has none), read
    within ``limits`` (default :class:`Limits`).

    Raises:
        SessionFileError: the file is not a readable session file.
    """
    with SessionArchive(path, limits or Limits()) as archive:
        manifest = archive.manifest
        if HISTORY not in archive.names():
            return manifest, None
        return manifest, archive.read_model(HISTORY, Snapshot)


def as_finished(saved: Snapshot, main_run: str) -> Snapshot:
    """The saved runs as a viewer shows them: every one finished, the main one as ``main_run``."""
    runs = [run.model_copy(update={"state": "finished"}) for run in saved.runs]
    main = next((i for i, run in enumerate(runs) if run.parent is None), None)
    if main is not None:
        runs[main] = runs[main].model_copy(update={"run": main_run})
    return saved.model_copy(update={"runs": runs})


def read_only_message(path: str | os.PathLike[str]) -> str:
    """What a control command sent to a viewed file is answered."""
    return (
        f"this is {Path(path).name}, an exported session opened read-only (onthefly view): "
        "control commands need a live run; resume it with resume_from= to train on"
    )


def serve_until_interrupted(path: str | os.PathLike[str], port: int | None = None) -> None:
    """:func:`serve`, then block until Ctrl+C (``onthefly view``)."""
    server = serve(path, port=port)
    print(f"[onthefly] viewing {path} read-only; Ctrl+C to stop", flush=True)
    try:
        threading.Event().wait()
    finally:
        server.close()
