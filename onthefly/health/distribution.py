"""Distribution: do the ranks of a distributed run agree on where they are and what they hold?

Run at a control round, on every rank at the same step (the ``health`` command with
``check="distribution"`` reaches every rank). Each rank sends rank 0 its cursor (step,
epoch, sampler epoch, batches into the epoch, time per batch), the time of its last control
collective, and digests of every parameter, buffer and optimizer state tensor
(:mod:`onthefly.distributed.parity`). Rank 0 reports:

* ``info``: world size, backend, control interval and timeout; one finding per rank with
  its cursor and last collective; and, when all agree, what was compared;
* ``error``: a rank at another position than rank 0, and every rank whose tensors differ
  from the reference (the value most ranks hold; rank 0's on a tie), naming the tensors —
  DDP keeps ranks identical, so a difference means a rank was changed behind its back (a
  rank-local edit, non-deterministic kernels, a bug).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from torch import nn

from onthefly.distributed import parity
from onthefly.distributed.cursor import Cursor
from onthefly.distributed.group import ControlGroup
from onthefly.health.findings import Finding, finding, rounded

SHOWN = 5
"""Tensor names a summary lists before "… (n in all)"; details list them all."""

_POSITION = ("step", "epoch", "sampler_epoch", "batches")

_SYNCED_AT_FORWARD = (".running_mean", ".running_var")
"""BatchNorm buffers DDP copies from rank 0 at each forward: they differ between two steps."""


@dataclass(frozen=True)
class Control:
    """The control rounds as rank 0 spaces them."""

    interval: int
    round_cost_s: float | None = None


@dataclass(frozen=True)
class RankState:
    """What one rank reports to the check."""

    cursor: Cursor
    last_collective: float
    digests: dict[str, parity.Digests]


def local_state(
    module: nn.Module, optimizers: list[Any], group: ControlGroup, cursor: Cursor
) -> RankState:
    """This rank's part of the check."""
    digests = parity.model_digests(module)
    digests["optimizer state"] = parity.optimizer_digests(optimizers, module)
    return RankState(cursor, group.last_collective, digests)


def check_distribution(
    module: nn.Module,
    optimizers: list[Any],
    group: ControlGroup,
    cursor: Cursor,
    control: Control,
) -> list[Finding]:
    """Compare the ranks (a collective: every rank calls it at the same round).

    Args:
        module: this rank's plain module.
        optimizers: this rank's optimizers.
        group: the control group.
        cursor: this rank's cursor now.
        control: the control rounds' interval and cost (for the report).

    Returns:
        The findings on rank 0; ``[]`` on the other ranks.
    """
    mine = local_state(module, optimizers, group, cursor)
    states = group.gather(mine, "distribution health check")
    if states is None:
        return []
    return compare(states, group, control)


def compare(states: list[RankState], group: ControlGroup, control: Control) -> list[Finding]:
    """Rank 0's findings from every rank's state (indexed by rank)."""
    now = time.time()
    found = [_overview(states, group, control)]
    found += [_rank(state, now) for state in states]
    found += _positions(states)
    differing, held_apart = [], []
    for kind in parity.KINDS:
        for rank, names in sorted(parity.mismatches([s.digests[kind] for s in states]).items()):
            if kind == "buffer":
                stats = [n for n in names if n.endswith(_SYNCED_AT_FORWARD)]
                names = [n for n in names if not n.endswith(_SYNCED_AT_FORWARD)]
                if stats:
                    held_apart.append(_own_statistics(rank, stats))
            if names:
                differing.append(_differs(rank, kind, names))
    found += differing + held_apart
    if not differing and not held_apart:
        counts = {kind: len(states[0].digests[kind]) for kind in parity.KINDS}
        entries = counts["optimizer state"]
        found.append(
            finding(
                "distribution",
                "info",
                f"all {len(states)} ranks hold identical parameters ({counts['parameter']}), "
                f"buffers ({counts['buffer']}) and optimizer state ({entries} "
                f"entr{'y' if entries == 1 else 'ies'})",
                compared=counts,
            )
        )
    return found


def _overview(states: list[RankState], group: ControlGroup, control: Control) -> Finding:
    interval = control.interval
    cost = None if control.round_cost_s is None else rounded(control.round_cost_s * 1e3)
    return finding(
        "distribution",
        "info",
        f"{len(states)} ranks over {group.backend}; a control round every {interval} "
        f"batch{'es' if interval != 1 else ''}; collective timeout {group.timeout_s:.0f} s",
        world_size=len(states),
        backend=group.backend,
        control_interval=interval,
        control_round_ms=cost,
        timeout_s=group.timeout_s,
    )


def _rank(state: RankState, now: float) -> Finding:
    c = state.cursor
    sampler = f"sampler epoch {c.sampler_epoch}"
    if c.sampler_epoch is None:
        sampler = "no epoch-aware sampler"
    per_batch = "" if c.step_time is None else f", {c.step_time * 1e3:.1f} ms per batch"
    ago = max(now - state.last_collective, 0.0)
    return finding(
        "distribution",
        "info",
        f"rank {c.rank}: step {c.step}, epoch {c.epoch} ({sampler}), {c.batches} batches into "
        f"the epoch{per_batch}; last collective {ago:.2f} s ago",
        **c.to_json(),
        last_collective=state.last_collective,
        last_collective_ago_s=rounded(ago),
    )


def _positions(states: list[RankState]) -> list[Finding]:
    reference = states[0].cursor
    found = []
    for state in states[1:]:
        c = state.cursor
        off = {k: (getattr(c, k), getattr(reference, k)) for k in _POSITION}
        off = {k: pair for k, pair in off.items() if pair[0] != pair[1]}
        if off:
            where = ", ".join(f"{k} {mine} (rank 0: {ref})" for k, (mine, ref) in off.items())
            found.append(
                finding(
                    "distribution",
                    "error",
                    f"rank {c.rank} is elsewhere than rank 0: {where}",
                    rank=c.rank,
                    **{k: mine for k, (mine, _) in off.items()},
                )
            )
    return found


def _own_statistics(rank: int, names: list[str]) -> Finding:
    # DDP copies rank 0's buffers to every rank at the start of each forward, so between two
    # steps each rank holds the running statistics of its own last batch: expected, not a fault.
    shown = ", ".join(names[:SHOWN]) + (f" … ({len(names)} in all)" if len(names) > SHOWN else "")
    return finding(
        "distribution",
        "info",
        f"rank {rank} holds its own BatchNorm running statistics ({shown}): expected between "
        "two steps, DDP gives every rank rank 0's at the start of each forward",
        rank=rank,
        kind="buffer",
        tensors=names,
    )


def _differs(rank: int, kind: str, names: list[str]) -> Finding:
    shown = ", ".join(names[:SHOWN]) + (f" … ({len(names)} in all)" if len(names) > SHOWN else "")
    plural = "s" if len(names) != 1 else ""
    return finding(
        "distribution",
        "error",
        f"rank {rank} differs in {len(names)} {kind} tensor{plural}: {shown}",
        rank=rank,
        kind=kind,
        tensors=names,
        reference="the value most ranks hold (rank 0's on a tie)",
    )
