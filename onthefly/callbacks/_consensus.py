"""Whether a run has several ranks that must act together.

The rounds in which they agree (rank 0 decides, every rank follows at the same step) are
:class:`~onthefly.distributed.control.RankSync`'s; parts ask here only whether the run is
distributed at all.
"""

from __future__ import annotations

from typing import Any


def distributed(trainer: Any) -> bool:
    """Whether the run has several ranks that must agree."""
    return int(getattr(trainer, "world_size", 1)) > 1
