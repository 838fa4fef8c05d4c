"""What the fork commands (``compare``, ``merge``, ``discard_merge``) use of the part that
owns the forks (:class:`~onthefly.callbacks.fork_spawner.ForkSpawner`), and what they share:
a fork as a model, the models a command names, the evaluator of their targets.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.forks.adapters import add_adapters
from onthefly.forks.compare import Evaluator, targets
from onthefly.forks.lineage import Lineage
from onthefly.forks.registry import ForkRecord, ForkRegistry
from onthefly.forks.run import LongCommand, RankedInbox, RunParts
from onthefly.forks.spawn import model_copy


class ForkSession(RankedInbox, Protocol):
    """The run's session as the fork commands use it."""

    run_name: str | None

    def position(self, trainer: TrainerHost) -> dict[str, Any]:
        """Where the run stands (step, epoch), for a reply."""
        ...


@dataclass
class Undo:
    """What a merge replaced: the run's weights and optimizer states (CPU copies)."""

    name: str
    run: str
    weights: dict[str, torch.Tensor]
    optimizers: list[dict[str, Any]]


class MergeHistory:
    """The merges that can still be discarded (latest last); emptied when training resumes."""

    def __init__(self) -> None:
        self.undo: list[Undo] = []

    def forget(self) -> None:
        self.undo.clear()


class ForkHost(Protocol):
    """The part that owns the forks, as its commands see it."""

    @property
    def session(self) -> ForkSession:
        """The run's session."""
        ...

    registry: ForkRegistry
    lineage: Lineage
    merges: MergeHistory
    snapshot: Callable[[Any, str], Any] | None

    def parts(self, trainer: TrainerHost) -> RunParts:
        """The run's model, optimizer, data and loss (refused when forks are unsupported)."""
        ...

    def paused(self, what: str) -> None:
        """Refuse ``what`` unless the run is paused."""
        ...

    def taken_names(self) -> set[str]:
        """Names no new fork or merge may take."""
        ...

    def publish_lineage(self) -> None:
        """Send the lineage to the dashboard."""
        ...


def fork_model(spawner: ForkHost, parent: nn.Module, record: ForkRecord) -> nn.Module:
    """The fork ``record`` as a model: a copy of the parent's architecture (with the fork's
    adapters) holding the fork's saved weights."""
    model = model_copy(parent)
    if record.adapter_rank is not None:
        add_adapters(model, record.adapter_rank)
    return spawner.registry.load_weights(record, model)


def records_of(spawner: ForkHost, names: list[str]) -> list[ForkRecord]:
    if len(set(names)) != len(names):
        raise ConfigurationError(f"forks {names} name a fork twice; expected distinct names")
    return [spawner.registry.with_weights(name) for name in names]


def evaluator_of(
    parts: RunParts, records: list[ForkRecord], rest_max: int, interrupts: LongCommand
) -> Evaluator:
    if parts.spec is None:
        raise ConfigurationError(
            "comparing models needs the loss function with a 'reduction' option (e.g. "
            "nn.CrossEntropyLoss); pass loss_fn= to fit() / attach_lightning / OnTheFly"
        )
    found = targets(
        {r.name: r.indices for r in records},
        parts.train_size,
        parts.val is not None,
        rest_max,
    )
    return Evaluator(found, parts.train, parts.val, parts.spec, interrupts.check)


def active_node(spawner: ForkHost) -> dict[str, Any]:
    """The lineage's active node (the model the run trains now; the main node named after
    the run, as in the lineage)."""
    server = spawner.session.server
    if server is not None:
        spawner.lineage.bind_main(server.main_run, spawner.session.run_name)
    return spawner.lineage.node(spawner.lineage.active)


def parent_name(spawner: ForkHost) -> str:
    """The name of the lineage's active node (the model a merge starts from)."""
    return str(active_node(spawner)["name"])
