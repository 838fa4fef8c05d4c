"""Per-step values kept on their device and shipped to the host in batches, as columns.

Reading a CUDA tensor's value (``.item()``, ``.cpu()``) waits for the GPU: done every step
it would stall the training loop. :class:`StepBuffer` instead keeps each step's values as
device tensors; every ``every_steps`` steps (or ``every_s`` seconds) it stacks them into one
tensor per device and starts a single copy to the host (:mod:`onthefly.transfers`). Steps
are delivered in order once their copy is complete.

Steps travel as :class:`Steps`, one list per value (a column): a batch of steps is taken
and delivered in a few list operations, not a dictionary per step. A total norm (the
gradient norm) is recorded as its parts' norms (:class:`Norms`, one fused
``_foreach_norm`` per step) and reduced when the batch ships: one reduction for all its
steps instead of two more operations per step.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from onthefly.drivers.values import Scalar
from onthefly.transfers import Batches, HostCopy, copy_to_host


class Norms(NamedTuple):
    """The L2 norms of a vector's parts (e.g. of each gradient); the buffer ships the norm of
    the whole vector."""

    parts: Sequence[torch.Tensor]


Value = Scalar | Norms


class Row(NamedTuple):
    """One optimizer step's values, on the host."""

    step: int
    epoch: int
    values: dict[str, float]


@dataclass
class Steps:
    """Optimizer steps as columns: ``step[i]``, ``epoch[i]``, and ``values[name][i]`` for each
    value (``None`` where step ``i`` has none).

    Example:
        >>> steps = Steps([4, 5], [0, 0], {"loss": [0.5, 0.25], "lr": [0.1, None]})
        >>> steps.rows()[1]
        Row(step=5, epoch=0, values={'loss': 0.25})
    """

    step: list[int]
    epoch: list[int]
    values: dict[str, list[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.step)

    def rows(self) -> list[Row]:
        """The steps one by one, each with the values it has."""
        columns = list(self.values.items())
        return [
            Row(step, epoch, {name: column[i] for name, column in columns if column[i] is not None})
            for i, (step, epoch) in enumerate(zip(self.step, self.epoch, strict=True))
        ]

    @classmethod
    def joined(cls, parts: Sequence[Steps]) -> Steps:
        """One batch of ``parts``' steps, in order (a column a part lacks is ``None`` there)."""
        if len(parts) == 1:
            return parts[0]
        names = dict.fromkeys(name for part in parts for name in part.values)
        values: dict[str, list[Any]] = {name: [] for name in names}
        for part in parts:
            for name, column in values.items():
                column.extend(part.values.get(name) or [None] * len(part))
        return cls(
            [s for part in parts for s in part.step],
            [e for part in parts for e in part.epoch],
            values,
        )


@dataclass
class _Transfer:
    steps: Steps
    # Per device: the (column, row index) of each stacked value, and their copy.
    parts: list[tuple[list[tuple[str, int]], HostCopy]] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)  # the columns with values on a device

    def ready(self) -> bool:
        return all(copy.ready() for _, copy in self.parts)

    def wait(self) -> None:
        for _, copy in self.parts:
            copy.wait()

    def result(self) -> Steps:
        steps = self.steps
        values = dict(steps.values)  # columns of host floats (and None) are kept as they are
        for name in self.copied:
            values[name] = [v if v is None or type(v) is float else None for v in values[name]]
        for slots, copy in self.parts:
            for (name, index), value in zip(slots, copy.host.tolist(), strict=True):
                values[name][index] = value
        return Steps(steps.step, steps.epoch, values)


class StepBuffer:
    """Collects per-step values and hands them, as host floats, to ``sink`` in batches.

    Args:
        sink: receives each completed batch of steps, in step order.
        every_steps: start a copy after this many steps.
        every_s: or when this many seconds passed since the last copy started.

    Raises:
        ValueError: ``every_steps`` < 1 or ``every_s`` <= 0.

    Example:
        >>> rows = []
        >>> buffer = StepBuffer(lambda steps: rows.extend(steps.rows()), every_steps=2)
        >>> buffer.add(1, 0, {"loss": torch.tensor(0.5)})
        >>> buffer.add(2, 0, {"loss": torch.tensor(0.25)})
        >>> [row.values["loss"] for row in rows]
        [0.5, 0.25]
    """

    def __init__(
        self, sink: Callable[[Steps], None], every_steps: int = 32, every_s: float = 0.1
    ) -> None:
        self._batches: Batches[Steps, _Transfer] = Batches(
            _start, lambda transfer: sink(transfer.result()), every_steps, every_s, size=len
        )

    def add(self, step: int, epoch: int, values: Mapping[str, Value]) -> None:
        """Record one step (the buffer keeps ``values``); never waits for the device."""
        self.add_steps(Steps([step], [epoch], {name: [v] for name, v in values.items()}))

    def add_steps(self, steps: Steps) -> None:
        """Record a batch of steps (the buffer keeps the lists); never waits for the device."""
        self._batches.add_all((steps,))

    def flush(self) -> None:
        """Ship everything recorded so far and wait for it (pause, epoch end, end of run)."""
        self._batches.flush()


def _start(parts: list[Steps]) -> _Transfer:
    """Stack the steps' tensors into one per device and start copying each to the host."""
    transfer = _Transfer(Steps.joined(parts))
    slots: list[tuple[str, int]] = []
    tensors: list[torch.Tensor] = []
    norm_slots: list[tuple[str, int]] = []
    norms: list[Sequence[torch.Tensor]] = []
    for name, recorded in transfer.steps.values.items():
        kinds = {type(value) for value in recorded}
        if kinds <= _ON_HOST:
            continue  # nothing, or already on the host (learning rates)
        transfer.copied.append(name)
        if kinds == _TENSORS:  # the usual column (the losses): all at once
            slots.extend(zip(itertools.repeat(name), range(len(recorded))))
            tensors.extend(recorded)
            continue
        for index, value in enumerate(recorded):
            kind = type(value)
            if value is None or kind is float:
                continue
            if kind is Norms:
                norm_slots.append((name, index))
                norms.append(value.parts)
            else:
                slots.append((name, index))
                tensors.append(value)
    columns = _columns(slots, tensors)
    if norms:  # joins the column of its device: still one copy per device
        totals = _total_norms(norms)
        device_slots, column = columns.get(totals.device, ([], None))
        joined = totals if column is None else torch.cat([column, totals])
        columns[totals.device] = (device_slots + norm_slots, joined)
    for device_slots, column in columns.values():
        transfer.parts.append((device_slots, copy_to_host(column)))
    return transfer


_ON_HOST = frozenset({float, type(None)})
_TENSORS = frozenset({torch.Tensor})

Columns = dict[torch.device, tuple[list[tuple[str, int]], torch.Tensor]]


def _columns(slots: list[tuple[str, int]], tensors: list[torch.Tensor]) -> Columns:
    """The tensors as one float32 vector per device, with the slot of each of its values."""
    if not tensors:
        return {}
    try:  # the usual batch: scalars on one device, stacked in one call
        column = torch.stack(tensors).to(torch.float32)
        if column.ndim == 1:
            return {column.device: (slots, column)}
    except RuntimeError:  # several devices, or a value of shape (1,) among scalars
        pass
    by_device: dict[torch.device, tuple[list[tuple[str, int]], list[torch.Tensor]]] = {}
    for slot, value in zip(slots, tensors, strict=True):
        device_slots, device_tensors = by_device.setdefault(value.device, ([], []))
        device_slots.append(slot)
        device_tensors.append(value.reshape(()).to(torch.float32))
    return {
        device: (device_slots, torch.stack(device_tensors))
        for device, (device_slots, device_tensors) in by_device.items()
    }


def _total_norms(groups: list[Sequence[torch.Tensor]]) -> torch.Tensor:
    """The L2 norm of each group of part norms, as one float32 vector on the first part's device."""
    device = groups[0][0].device
    if len({len(parts) for parts in groups}) == 1:  # the usual case: one reduction for all
        flat = _stack([part for parts in groups for part in parts], device)
        return torch.linalg.vector_norm(flat.view(len(groups), -1), dim=1)
    return torch.stack([torch.linalg.vector_norm(_stack(parts, device)) for parts in groups])


def _stack(parts: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    try:
        stacked = torch.stack(tuple(parts))
    except RuntimeError:  # parts on several devices (a model split across GPUs)
        stacked = torch.stack([part.to(device) for part in parts])
    return stacked.to(device, torch.float32)
