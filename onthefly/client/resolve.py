"""Which live session a user means by ``RUN``: a run name, ``project/run`` or a port.

Shared by :func:`onthefly.connect` and the CLI. Reads discovery files only: no network,
no torch.
"""

from __future__ import annotations

import os

from onthefly.errors import AmbiguousSession, SessionNotFound
from onthefly.server.discovery import SessionFile, list_sessions, sessions_dir

HOW_TO_START = (
    "start a training script that uses OnTheFly (onthefly.Trainer or the OnTheFly callback), "
    "or set ONTHEFLY_HOME to the home that script uses"
)


VIEW_PREFIX = "view:"
"""How a read-only ``onthefly view`` is named: ``view:project/run`` (or ``view:run``)."""


def name_of(session: SessionFile) -> str:
    """The name that picks this session out: ``project/run``, ``view:project/run`` for a
    read-only view of an exported session."""
    name = f"{session.project}/{session.run}"
    return VIEW_PREFIX + name if session.viewing is not None else name


def describe(session: SessionFile) -> str:
    """``project/run (port N, pid P)``: how a session is named in messages."""
    return f"{name_of(session)} (port {session.port}, pid {session.pid})"


def matches(session: SessionFile, run: str) -> bool:
    """Whether ``run`` names this session: its run name, ``project/run`` or its port; a
    view's name starts with ``view:``, and a plain name matches a view only when no live
    run has it (see :func:`find_session`)."""
    if run.isdigit() and int(run) == session.port:
        return True
    if run.startswith(VIEW_PREFIX):
        if session.viewing is None:
            return False
        run = run[len(VIEW_PREFIX) :]
    if "/" in run:
        return run == f"{session.project}/{session.run}"
    return run == session.run


def find_session(run: str | None, home: str | os.PathLike[str] | None = None) -> SessionFile:
    """The one live session that ``run`` names.

    A training run and a read-only ``onthefly view`` of a file it exported share their
    project and run name: a plain name means the training run, ``view:project/run`` the view
    (either is also named by its port).

    Args:
        run: a run name, ``project/run``, ``view:project/run`` or a port; ``None`` when
            exactly one session is live.
        home: the OnTheFly home to look in (default ``$ONTHEFLY_HOME`` or ``~/.onthefly``).

    Raises:
        SessionNotFound: no live session matches (the message says where it looked).
        AmbiguousSession: several match (the message lists them, with how to name each).

    Example:
        >>> find_session("mnist/baseline").port  # doctest: +SKIP
        52114
    """
    live = list_sessions(home)
    where = sessions_dir(home)
    if not live:
        raise SessionNotFound(f"no live OnTheFly session in {where}: {HOW_TO_START}")
    chosen = live if run is None else [s for s in live if matches(s, run)]
    training = [s for s in chosen if s.viewing is None]
    if run is not None and not run.isdigit() and training:
        chosen = training  # a plain name means the training run, not a view of its export
    listing = "; ".join(describe(s) for s in live)
    if not chosen:
        raise SessionNotFound(
            f"no live session matches {run!r} in {where}; expected a run name, project/run or "
            f"port of one of: {listing}"
        )
    if len(chosen) > 1:
        asked = "" if run is None else f" match {run!r}"
        names = [name_of(s) for s in chosen]
        # A name shared by several sessions only picks one out by its port.
        how = [s.port if names.count(name_of(s)) > 1 else name_of(s) for s in chosen]
        raise AmbiguousSession(
            f"{len(chosen)} live sessions{asked}: {'; '.join(describe(s) for s in chosen)}; "
            f"name one of them: {', '.join(str(h) for h in how)}"
        )
    return chosen[0]
