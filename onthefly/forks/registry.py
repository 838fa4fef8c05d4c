"""The forks of a session: what each was trained on and how, how it ended, and its weights.

A fork's final weights are a file in the session's folder, ``<workdir>/forks/<name>.pt``
(``torch.save`` of its ``state_dict``), so that a session export carries them (``files/``)
and a resumed session finds them again. Only forks that finished their budget keep weights:
a cancelled or failed fork is recorded without.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from onthefly.errors import ConfigurationError
from onthefly.samples.selection import check_name

FOLDER = "forks"
"""The forks' folder inside the session's working folder."""

_DEFAULT = re.compile(r"^fork-(\d+)$")


@dataclass
class ForkRecord:
    """One fork of the session.

    Attributes:
        name: unique among the session's forks and merges (also its file's name).
        run: the run its metrics stream into.
        parent: the lineage node it was forked from.
        parent_step: the parent's step then.
        indices: its slice: dataset indices of the training set.
        selection: ``{name, criterion, size}`` of the slice (``name`` of a reused selection).
        budget: ``{"steps": n}`` or ``{"epochs": n}``.
        hparams: ``lr`` (of its first param group), ``batch_size``, ``optimizer``,
            ``adapter_rank``.
        status: ``running``, ``done``, ``cancelled`` or ``failed``.
        steps: optimizer steps it took.
        duration: seconds it trained.
        slice_loss: its mean loss on its slice at the end (``None`` without a loss function).
        parent_slice_loss: the parent's mean loss on that slice when forked.
        message: why it failed.
        has_weights: whether its weights file was written.
        warnings: what the fork was warned about (a narrow slice).
    """

    name: str
    run: str
    parent: str
    parent_step: int
    indices: list[int]
    selection: dict[str, Any]
    budget: dict[str, int]
    hparams: dict[str, Any]
    status: str = "running"
    steps: int = 0
    duration: float = 0.0
    slice_loss: float | None = None
    parent_slice_loss: float | None = None
    message: str | None = None
    has_weights: bool = False
    created: float = field(default_factory=time.time)
    warnings: list[str] = field(default_factory=list)

    @property
    def adapter_rank(self) -> int | None:
        rank = self.hparams.get("adapter_rank")
        return None if rank is None else int(rank)

    def summary(self) -> dict[str, Any]:
        """The record without its indices, as replies carry it."""
        state = asdict(self)
        del state["indices"]
        return state


class ForkRegistry:
    """The session's forks by name, and their weights files.

    Args:
        folder: returns the session's working folder (created on first use).

    Example:
        >>> registry = ForkRegistry(lambda: Path("/tmp/run"))
        >>> registry.next_name()
        'fork-1'
    """

    def __init__(self, folder: Callable[[], Path]) -> None:
        self._workdir = folder
        self._forks: dict[str, ForkRecord] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._forks

    def __iter__(self) -> Iterator[ForkRecord]:
        return iter(list(self._forks.values()))

    def next_name(self) -> str:
        """``fork-<n>``, one past the highest such name so far."""
        numbers = [int(m.group(1)) for name in self._forks if (m := _DEFAULT.match(name))]
        return f"fork-{max(numbers, default=0) + 1}"

    def check_new(self, name: str, taken: Collection[str] = ()) -> str:
        """``name`` if it is a valid name no fork (nor ``taken``) has yet.

        Raises:
            ConfigurationError: an invalid or taken name.
        """
        check_name(name)
        if name in self._forks or name in taken:
            raise ConfigurationError(
                f"the name {name!r} is taken by another fork or merge; expected a new name"
            )
        return name

    def add(self, record: ForkRecord) -> None:
        self._forks[record.name] = record

    def get(self, name: str) -> ForkRecord:
        """The fork ``name``.

        Raises:
            ConfigurationError: there is none (the message lists the forks).
        """
        try:
            return self._forks[name]
        except KeyError:
            known = ", ".join(sorted(self._forks)) or "none yet"
            raise ConfigurationError(f"no fork named {name!r}; expected one of: {known}") from None

    def with_weights(self, name: str) -> ForkRecord:
        """The fork ``name``, which must have weights.

        Raises:
            ConfigurationError: no such fork, or it has no weights (cancelled or failed).
        """
        record = self.get(name)
        if not record.has_weights:
            raise ConfigurationError(
                f"the fork {name!r} is {record.status} and has no weights; expected a fork that "
                "finished its budget"
            )
        return record

    def weights_path(self, name: str) -> Path:
        """Where the weights of ``name`` are (or go)."""
        return Path(self._workdir()) / FOLDER / f"{check_name(name)}.pt"

    def save_weights(self, record: ForkRecord, model: nn.Module) -> None:
        """Write ``model``'s ``state_dict`` as ``record``'s weights file."""
        path = self.weights_path(record.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), path)
        record.has_weights = True

    def load_weights(self, record: ForkRecord, model: nn.Module) -> nn.Module:
        """Load ``record``'s weights into ``model`` (strictly; safe loading) and return it.

        Raises:
            ConfigurationError: the file is missing or does not fit ``model``.
        """
        path = self.weights_path(record.name)
        if not path.is_file():
            raise ConfigurationError(
                f"the weights of fork {record.name!r} are missing ({path}); expected the file "
                "the fork wrote (was the session folder cleaned?)"
            )
        device = next((p.device for p in model.parameters()), torch.device("cpu"))
        state = torch.load(path, map_location=device, weights_only=True)
        try:
            model.load_state_dict(state)
        except RuntimeError as exc:
            raise ConfigurationError(
                f"the weights of fork {record.name!r} do not fit the model: {exc}"
            ) from None
        return model

    def summaries(self) -> list[dict[str, Any]]:
        return [record.summary() for record in self._forks.values()]

    def state_dict(self) -> dict[str, Any]:
        """Plain containers and tensors only (``torch.load(weights_only=True)``-safe)."""
        state = {}
        for name, record in self._forks.items():
            fields = asdict(record)
            fields["indices"] = torch.tensor(record.indices, dtype=torch.int64)
            state[name] = fields
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        forks = {}
        for name, fields in state.items():
            values = dict(fields)
            values["indices"] = [int(i) for i in values["indices"].tolist()]
            forks[name] = ForkRecord(**values)
        self._forks = forks
