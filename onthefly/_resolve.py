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


def describe(session: SessionFile) -> str:
    """``project/run (port N, pid P)``: how a session is named in messages."""
    return f"{session.project}/{session.run} (port {session.port}, pid {session.pid})"


def matches(session: SessionFile, run: str) -> bool:
    """Whether ``run`` names this session: its run name, ``project/run`` or its port."""
    if run.isdigit() and int(run) == session.port:
        return True
    if "/" in run:
        return run == f"{session.project}/{session.run}"
    return run == session.run


def find_session(run: str | None, home: str | os.PathLike[str] | None = None) -> SessionFile:
    """The one live session that ``run`` names.

    Args:
        run: a run name, ``project/run`` or a port; ``None`` when exactly one session is live.
        home: the OnTheFly home to look in (default ``$ONTHEFLY_HOME`` or ``~/.onthefly``).

    Raises:
        SessionNotFound: no live session matches (the message says where it looked).
        AmbiguousSession: several match (the message lists them).

    Example:
        >>> find_session("mnist/baseline").port  # doctest: +SKIP
        52114
    """
    live = list_sessions(home)
    where = sessions_dir(home)
    if not live:
        raise SessionNotFound(f"no live OnTheFly session in {where}: {HOW_TO_START}")
    chosen = live if run is None else [s for s in live if matches(s, run)]
    listing = "; ".join(describe(s) for s in live)
    if not chosen:
        raise SessionNotFound(
            f"no live session matches {run!r} in {where}; expected a run name, project/run or "
            f"port of one of: {listing}"
        )
    if len(chosen) > 1:
        asked = "" if run is None else f" match {run!r}"
        raise AmbiguousSession(
            f"{len(chosen)} live sessions{asked}: {'; '.join(describe(s) for s in chosen)}; "
            "name one as PROJECT/RUN or by its port"
        )
    return chosen[0]
