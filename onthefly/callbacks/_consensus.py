"""One decision for every rank of a distributed run.

Only global rank 0 serves the session, so only it sees commands. At each batch end it
broadcasts what all ranks do next (run, hold, stop), as Lightning's ``EarlyStopping``
reaches one decision for all ranks; the other ranks follow. While holding, rank 0 repeats
the decision every wait slice, so the other ranks never sit in one collective for long.
A single process skips all of this: no collective, no cost.
"""

from __future__ import annotations

from typing import Any

import torch

RUN, HOLD, STOP = 0, 1, 2


def distributed(trainer: Any) -> bool:
    """Whether the run has several ranks that must agree."""
    return int(getattr(trainer, "world_size", 1)) > 1


def agree(decision: int) -> int:
    """Rank 0's ``decision``, on every rank (one small broadcast; call it on all ranks)."""
    box = [decision]
    torch.distributed.broadcast_object_list(box, src=0)
    return int(box[0])
