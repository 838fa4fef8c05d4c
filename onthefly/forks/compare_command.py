"""The ``compare`` command of :class:`~onthefly.callbacks.fork_spawner.ForkSpawner`: one
table, rows = models (the run's, its forks, optionally baselines), columns = targets (each
fork's slice, the rest of the training set, the validation set).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from onthefly.forks import baselines
from onthefly.forks.host import ForkHost, active_node, evaluator_of, fork_model, records_of
from onthefly.forks.run import LongCommand
from onthefly.forks.spawn import parent_untouched
from onthefly.protocol import Cancelled, CompareReply, CompareRow

if TYPE_CHECKING:
    from onthefly.commands.registry import Boundary
    from onthefly.server import PendingCommand


def compare(spawner: ForkHost, boundary: Boundary, cmd: PendingCommand) -> None:
    """The ``compare`` command: one table, rows = models, columns = targets; with
    ``baselines``, the parent trained on for each fork's budget (:mod:`.baselines`)."""
    command: Any = cmd.command
    trainer = boundary.trainer
    parts = spawner.parts(trainer)
    names = list(command.forks) or [r.name for r in spawner.registry if r.has_weights]
    records = records_of(spawner, names)
    interrupts = LongCommand(spawner.session, compare=True)
    started = time.perf_counter()
    try:
        evaluator = evaluator_of(parts, records, command.rest_max, interrupts)
        active = active_node(spawner)
        rows = [{"model": active["name"], "run": active["run"], "kind": active["kind"]}]
        rows += [{"model": r.name, "run": r.run, "kind": "fork"} for r in records]
        scores = [evaluator.scores(parts.model)]
        for record in records:
            with parent_untouched():
                scores.append(evaluator.scores(fork_model(spawner, parts.model, record)))
        notes: list[str] = []
        if command.baselines:
            planned, notes = baselines.plan(records, spawner.lineage.active, trainer.global_step)
            by_name = {r.name: r for r in records}
            for baseline in planned:
                model, problem = baselines.train(
                    trainer, parts, baseline, by_name[baseline.fork].indices, interrupts.check
                )
                if interrupts.cancelled:
                    break
                if model is None:
                    notes.append(f"the baseline {baseline.name!r} failed: {problem}")
                    continue
                with parent_untouched():
                    scores.append(evaluator.scores(model))
                rows.append({**baseline.row(), "steps": baseline.steps})
        if interrupts.cancelled or any(s is None for s in scores):
            cmd.reply(Cancelled(cancelled=True))
            return
        table = evaluator.table(scores)  # type: ignore[arg-type]
        for row, values in zip(rows, table["rows"], strict=True):
            row.update(values)
        cmd.reply(
            CompareReply(
                cancelled=False,
                step=int(trainer.global_step),
                targets=table["targets"],
                rows=[CompareRow(**row) for row in rows],
                notes=notes,
                duration=time.perf_counter() - started,
            )
        )
    finally:
        interrupts.replay(boundary)  # what came in meanwhile runs after the answer
