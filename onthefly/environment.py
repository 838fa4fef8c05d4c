"""Settings read from environment variables (``ONTHEFLY_*``), each checked.

A setting with a safe default (a timeout, a threshold) reports a bad value and goes on with
the default, so that a typo in the environment never ends a training run; a port is refused
instead, since another port than the one asked for would not be found.
"""

from __future__ import annotations

import logging
import os

from onthefly.errors import ConfigurationError

log = logging.getLogger(__name__)


def positive_seconds(name: str, default: float) -> float:
    """The environment variable ``name`` as a number of seconds > 0.

    Returns:
        Its value; ``default`` when it is unset or empty, or (with a warning) when it is not
        a number > 0.

    Example:
        >>> positive_seconds("ONTHEFLY_STALL_SECONDS", 30.0)  # unset: the default
        30.0
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value > 0:
        return value
    log.warning("%s=%r is ignored: expected a number of seconds > 0; using %g", name, raw, default)
    return default


def port(given: int | None, name: str, default: int) -> int:
    """``given``, else the environment variable ``name``, else ``default``, as a TCP port.

    Raises:
        ConfigurationError: ``name`` is not a number, or the port is outside 0-65535.

    Example:
        >>> port(None, "ONTHEFLY_PORT", 47621)  # unset: the default
        47621
    """
    if given is None:
        raw = os.environ.get(name, "").strip()
        if not raw:
            return default
        try:
            given = int(raw)
        except ValueError:
            raise ConfigurationError(
                f"{name}={raw!r} is not a number; expected a port between 0 and 65535"
            ) from None
    if not 0 <= given <= 65535:
        raise ConfigurationError(f"port {given} is out of range; expected 0-65535")
    return given
