"""Exceptions raised by OnTheFly.

Hierarchy::

    OnTheFlyError
    ├── SessionNotFound      no live session matches what was asked for
    ├── AmbiguousSession     several live sessions match; name one
    ├── AuthenticationError  the session refused the token or origin
    ├── SessionGone          the session closed while a command was in flight
    ├── CommandError         the session answered a command with an error (``code``)
    ├── ConfigurationError   an argument or input the caller can fix
    ├── SessionFileError     a session file (``.otf``) that cannot be read or does not fit
    └── DistributedError     the ranks of a distributed run can no longer work together

    Terminated               (a BaseException, as KeyboardInterrupt) the process got SIGTERM

Every message says what was wrong and what was expected.
"""

from __future__ import annotations


class OnTheFlyError(Exception):
    """Base class of every error OnTheFly raises on purpose."""


class SessionNotFound(OnTheFlyError):
    """No live session matches the requested run."""


class AmbiguousSession(OnTheFlyError):
    """Several live sessions match the requested run."""


class AuthenticationError(OnTheFlyError):
    """The session refused the connection (wrong token or origin)."""


class SessionGone(OnTheFlyError):
    """The session closed while a command was in flight."""


class CommandError(OnTheFlyError):
    """The session answered a command with an error.

    Attributes:
        code: the protocol's stable error code (see ``onthefly.protocol.ErrorCode``).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} [{code}]")
        self.code = code
        self.message = message


class ConfigurationError(OnTheFlyError, ValueError):
    """An argument or input that the caller can fix."""


class SessionFileError(OnTheFlyError):
    """A session file (``.otf``) that cannot be written, read or applied.

    Raised for a corrupt or truncated file, a file that is not a session file, one written
    by a newer OnTheFly (a newer format version), a file holding something that would run
    code on loading, a model that does not match the file (missing, unexpected or
    mis-shaped keys), or a disk that is full during an export.
    """


class DistributedError(OnTheFlyError):
    """The ranks of a distributed run can no longer work together.

    Raised on a rank whose collective with the others failed or timed out: another rank
    died, hung past the timeout, or the launcher ended the job. The message names the rank,
    the operation, the time waited and the timeout.
    """


class Terminated(BaseException):
    """The process received SIGTERM during a run (``docker stop``, systemd, SLURM, ``kill``).

    Raised in the training thread as Ctrl+C raises ``KeyboardInterrupt``, so the run unwinds
    the same way: callbacks clean up, the session's discovery file and temporary folder go.
    Left uncaught, the process then ends by SIGTERM, as it would have without OnTheFly. A
    ``BaseException``, so that ``except Exception`` does not swallow it.

    Attributes:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(
            f"received signal {signum} (SIGTERM): the run was stopped; its session was closed "
            "and its temporary files removed"
        )
        self.signum = signum
