"""Values reduced over the ranks of a distributed run (the native trainer's evaluations)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def mean_over_ranks(total: torch.Tensor, samples: int) -> torch.Tensor:
    """The mean over every rank's samples: sum of ``total`` / sum of ``samples``.

    One ``all_reduce`` on the training's process group, on ``total``'s device (call it on
    every rank).

    Args:
        total: this rank's sum of per-sample values (a scalar tensor).
        samples: this rank's number of samples.
    """
    both = torch.stack([total.double(), torch.tensor(float(samples), device=total.device).double()])
    dist.all_reduce(both)
    return (both[0] / both[1]).to(total.dtype)
