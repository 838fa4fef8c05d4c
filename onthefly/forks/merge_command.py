"""The ``merge`` and ``discard_merge`` commands of :class:`ForkSpawner`.

A merge builds the merged model from the run's model and the named forks
(:mod:`onthefly.forks.merging`; weights the user left open are chosen on validation from a
small grid, :mod:`onthefly.forks.merge_grid`), evaluates both on each fork's slice, the rest
of the training set and the validation set (the before/after report), checks that the merge
is no worse than the parent on validation (:mod:`onthefly.forks.gate`: a merge that is worse
is reported and left unapplied unless forced), then loads the merged weights *into the run's
model, in place*: the parameters stay the same objects, so the user's
optimizer, scheduler and any reference to them keep working, and resuming trains the merged
model. The optimizer's state is kept as it is by default (``optimizer="keep"``: the merged
weights are near the parent's, so its moment estimates stay on the right scale, whereas an
emptied Adam restarts its bias correction with a few large steps) or emptied
(``optimizer="reset"``).

The pre-merge weights and optimizer states are kept (on the CPU) until training resumes:
``discard_merge`` puts them back exactly, the latest merge first. The merge becomes a node of
the lineage and a run of its own (announced with the merge step; its training metrics
continue in the main run).

In a distributed run the three commands run on rank 0 alone (the other ranks hold), and a
merge or a discard ends with :func:`replicate` on every rank, in the same control round:
rank 0's parameters and buffers (and its optimizer state after a discard) are copied into
every rank's, in place, and a ``reset`` empties every rank's optimizer state, so all ranks
train on from identical models, as DDP requires.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from lightning.fabric.utilities.apply_func import apply_to_collection
from torch import nn

from onthefly._representable import check_command_values
from onthefly.distributed.group import ControlGroup
from onthefly.distributed.replicate import broadcast_module, broadcast_optimizer
from onthefly.errors import SessionFileError
from onthefly.forks import gate, merge_grid
from onthefly.forks.compare import Evaluator, Score, Target
from onthefly.forks.host import (
    ForkHost,
    Undo,
    evaluator_of,
    fork_model,
    parent_name,
    records_of,
)
from onthefly.forks.merge_grid import Chosen
from onthefly.forks.merging import Merged, MergeData, Options, optimizer_kind
from onthefly.forks.registry import ForkRecord
from onthefly.forks.run import LongCommand, Refused, RunParts
from onthefly.forks.spawn import parent_untouched
from onthefly.protocol import (
    Cancelled,
    DiscardReply,
    MergeReply,
    MetricsBody,
    StatusBody,
)

if TYPE_CHECKING:
    from onthefly.commands.registry import Boundary
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

REPLICATE = "fork_state"
"""The name :func:`replicate` is registered under with the run's ranks."""


# ---------------------------------------------------------------------------- merge


@dataclass
class _Built:
    """A merged model and its report, not applied yet."""

    chosen: Chosen
    before: dict[str, Score]
    after: dict[str, Score]
    evaluator: Evaluator

    @property
    def merged(self) -> Merged:
        return self.chosen.merged


def merge(spawner: ForkHost, boundary: Boundary, cmd: PendingCommand) -> None:
    """The ``merge`` command (see the module docstring)."""
    command: Any = cmd.command
    spawner.paused("a merge")
    parts = spawner.parts(boundary.trainer)
    check_command_values(parts.model.parameters(), command.lr, command.temperature, command.weights)
    records = records_of(spawner, list(command.forks))
    name = spawner.registry.check_new(command.name or _next_name(spawner), spawner.taken_names())
    interrupts = LongCommand(spawner.session, merge=name)
    started = time.perf_counter()
    try:
        built = _build(spawner, parts, records, command, interrupts)
        if built is None or interrupts.cancelled:
            cmd.reply(Cancelled(cancelled=True, name=name))
            return
        verdict = gate.check(built.before, built.after, command.tolerance)
        if verdict.passed or command.force:
            report = _commit(spawner, boundary, parts, records, name, command, built)
        else:
            report = _report(name, None, parent_name(spawner), records, command, built)
            report["reason"] = verdict.reason()
            log.warning("merge %r: %s", name, report["reason"])
        report.update(applied=verdict.passed or command.force, gate=verdict.to_json())
        duration = time.perf_counter() - started
        cmd.reply(
            MergeReply(**report, duration=duration, **spawner.session.position(boundary.trainer))
        )
    finally:
        interrupts.replay(boundary)  # what came in meanwhile runs after the answer


def _build(
    spawner: ForkHost,
    parts: RunParts,
    records: list[ForkRecord],
    command: Any,
    interrupts: LongCommand,
) -> _Built | None:
    """The merged model (weights chosen on the grid) and the before/after scores; ``None``
    when cancelled."""
    evaluator = evaluator_of(parts, records, command.rest_max, interrupts)
    rest = [t.indices for t in evaluator.targets if t.kind == "rest" and t.indices is not None]
    held_out = parts.evaluator([Target("val", "val", "val")], interrupts.check)
    score = gate.scorer(held_out if held_out is not None and parts.val is not None else evaluator)
    data = MergeData(
        train=parts.train,
        spec=evaluator.spec,
        slices=[r.indices for r in records],
        rest=rest[0].tolist() if rest else [],
        score=score if parts.val is not None else None,
        cancelled=interrupts.check,
    )
    options = Options(
        weights=command.weights,
        steps=command.steps,
        lr=command.lr or float(parts.optimizer.param_groups[0]["lr"]),
        optimizer=optimizer_kind(parts.optimizer),
    )
    grid = merge_grid.candidates(
        command.method, len(records), options, command.temperature, command.strength
    )
    with parent_untouched():
        before = evaluator.scores(parts.model)
        forks = [fork_model(spawner, parts.model, r) for r in records]
        chosen = merge_grid.choose(command.method, parts.model, forks, data, grid, score)
        after = None if chosen is None else evaluator.scores(chosen.merged.model)
    if before is None or after is None or chosen is None:
        return None
    return _Built(chosen, before, after, evaluator)


def _commit(
    spawner: ForkHost,
    boundary: Boundary,
    parts: RunParts,
    records: list[ForkRecord],
    name: str,
    command: Any,
    built: _Built,
) -> dict[str, Any]:
    """Load the merged model into the run, record the merge, and say what changed."""
    trainer, session, lineage = boundary.trainer, spawner.session, spawner.lineage
    if spawner.snapshot is not None:
        try:
            spawner.snapshot(trainer, "merge")
        except (SessionFileError, OSError) as exc:  # a convenience: the merge goes on
            log.warning("the checkpoint ring could not take a merge snapshot: %s", exc)
    weights, states = _apply(parts, built.merged.model, command.optimizer)
    _replicate_everywhere(spawner, command.optimizer)
    server = session.server
    assert server is not None  # commands come from the server
    step = int(trainer.global_step)
    parent = parent_name(spawner)
    run = server.add_run(name, parent=server.main_run)
    lineage.add_merge(run, name, step=step, method=command.method, sources=[r.run for r in records])
    spawner.merges.undo.append(Undo(name, run, weights, states))
    table = built.evaluator.table([built.before, built.after])
    _announce(server, run, step, table, session.run_name or server.main_run)
    spawner.publish_lineage()
    return _report(name, run, parent, records, command, built)


def _report(
    name: str,
    run: str | None,
    parent: str,
    records: list[ForkRecord],
    command: Any,
    built: _Built,
) -> dict[str, Any]:
    """What a merge reply says, applied or not: its choice, grid and before/after table."""
    table = built.evaluator.table([built.before, built.after])
    kept = built.merged.kept
    ingredients = [parent, *(r.name for r in records)]  # greedy's indices, the parent first
    return {
        "name": name,
        "run": run,
        "method": command.method,
        "forks": [r.name for r in records],
        "kept": None if kept is None else [ingredients[i] for i in kept],
        "choice": built.chosen.choice,
        "grid": built.chosen.grid,
        "optimizer": command.optimizer,
        "targets": table["targets"],
        "before": table["rows"][0],
        "after": table["rows"][1],
        "distill": built.merged.stats or None,
    }


def _apply(parts: RunParts, merged: nn.Module, optimizer: str) -> tuple[dict[str, Any], list[Any]]:
    """Load ``merged`` into the run's model in place; returns the replaced state."""
    weights = _cpu_copy(parts.model.state_dict())
    states = [_cpu_copy(parts.optimizer.state_dict())]
    parts.model.load_state_dict(merged.state_dict())
    if optimizer == "reset":
        parts.optimizer.state.clear()
    return weights, states


def _cpu_copy(state: Any) -> Any:
    return apply_to_collection(state, torch.Tensor, lambda t: t.detach().to("cpu", copy=True))


def _announce(server: Any, run: str, step: int, table: dict[str, Any], main: str) -> None:
    """The merge's run: its validation figures after the merge, and where training goes on."""
    names = [t["name"] for t in table["targets"]]
    if "val" in names:
        at = names.index("val")
        after = table["rows"][1]
        values = {"loss": after["loss"][at], "acc": after["accuracy"][at]}
        server.publish(run, MetricsBody(split="val", step=step, epoch=0, values=values))
    reason = f"merged at step {step}; training continues in run {main}"
    server.publish(run, StatusBody(state="finished", step=step, epoch=0, reason=reason))


def _next_name(spawner: ForkHost) -> str:
    taken = spawner.taken_names()
    n = 1
    while f"merge-{n}" in taken:
        n += 1
    return f"merge-{n}"


# ---------------------------------------------------------------------------- discard


def discard(spawner: ForkHost, boundary: Boundary, cmd: PendingCommand) -> None:
    """The ``discard_merge`` command: the latest merge's weights and optimizer state undone."""
    trainer = boundary.trainer
    spawner.paused("discarding a merge")
    if not spawner.merges.undo:
        raise Refused(
            "invalid_state",
            "no merge to discard: discard_merge undoes a merge until training resumes",
        )
    parts = spawner.parts(trainer)
    undo = spawner.merges.undo.pop()
    parts.model.load_state_dict(undo.weights)
    parts.optimizer.load_state_dict(undo.optimizers[0])
    _replicate_everywhere(spawner, "restore")
    active = spawner.lineage.discard(undo.run)
    server = spawner.session.server
    if server is not None:
        step = int(trainer.global_step)
        finished = StatusBody(state="finished", step=step, epoch=0, reason="discarded")
        server.publish(undo.run, finished)
    spawner.publish_lineage()
    cmd.reply(
        DiscardReply(
            name=undo.name,
            run=undo.run,
            active=active,
            **spawner.session.position(trainer),
        )
    )


# ---------------------------------------------------------------------------- every rank


def _replicate_everywhere(spawner: ForkHost, optimizer: str) -> None:
    """In a distributed run, give every rank rank 0's model (see :func:`replicate`)."""
    ranks = spawner.session.ranks
    if ranks.active:
        ranks.call(REPLICATE, optimizer)


def replicate(boundary: Boundary, optimizer: Any, group: ControlGroup) -> None:
    """Every rank: copy rank 0's parameters and buffers into this rank's model, in place.

    Args:
        boundary: this rank's trainer and module, at the control round.
        optimizer: ``"keep"`` (each rank keeps its own state: DDP kept them equal),
            ``"reset"`` (each rank empties it) or ``"restore"`` (rank 0's state, loaded on
            every rank).
        group: the control group.

    Raises:
        DistributedError: another rank died or hung.
    """
    trainer = boundary.trainer
    started = time.perf_counter()
    sent = broadcast_module(group, trainer.lightning_module)
    own = trainer.optimizers[0]
    if optimizer == "reset":
        own.state.clear()
    elif optimizer == "restore":
        sent += broadcast_optimizer(group, own)
    log.info(
        "rank %d: rank 0's model%s copied in %.3f s (%d bytes)",
        group.rank,
        " and optimizer state" if optimizer == "restore" else "",
        time.perf_counter() - started,
        sent,
    )
