"""Per-step values kept on their device and shipped to the host in batches.

Reading a CUDA tensor's value (``.item()``, ``.cpu()``) waits for the GPU: done every step
it would stall the training loop. :class:`StepBuffer` instead keeps each step's values as
device tensors; every ``every_steps`` steps (or ``every_s`` seconds) it stacks them into one
tensor per device and starts a single copy to the host (:mod:`onthefly.transfers`). Rows are
delivered in step order once their copy is complete.

A total norm (the gradient norm) is recorded as its parts' norms (:class:`Norms`, one fused
``_foreach_norm`` per step) and reduced when the batch ships: one reduction for all its
steps instead of two more operations per step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch

from onthefly.drivers.values import Scalar
from onthefly.transfers import Batches, HostCopy, copy_to_host


class Norms(NamedTuple):
    """The L2 norms of a vector's parts (e.g. of each gradient); the buffer ships the norm of
    the whole vector."""

    parts: Sequence[torch.Tensor]


Value = Scalar | Norms


class Row(NamedTuple):
    """One optimizer step's values, on the host (a tuple: one is made per step)."""

    step: int
    epoch: int
    values: dict[str, float]


_Row = tuple[int, int, Mapping[str, Value]]
"""One step as recorded: step, epoch, values (a plain tuple: cheap)."""


@dataclass
class _Transfer:
    rows: list[_Row]
    # Per device: the (row index, metric name) of each stacked value, and their copy.
    parts: list[tuple[list[tuple[int, str]], HostCopy]] = field(default_factory=list)

    def ready(self) -> bool:
        return all(copy.ready() for _, copy in self.parts)

    def wait(self) -> None:
        for _, copy in self.parts:
            copy.wait()

    def result(self) -> list[Row]:
        values: list[dict[str, float]] = [
            {name: v for name, v in row[2].items() if type(v) is float} for row in self.rows
        ]
        for slots, copy in self.parts:
            for (index, name), value in zip(slots, copy.host.tolist(), strict=True):
                values[index][name] = value
        pairs = zip(self.rows, values, strict=True)
        return [Row(step, epoch, vals) for (step, epoch, _), vals in pairs]


class StepBuffer:
    """Collects per-step values and hands them, as host floats, to ``sink`` in batches.

    Args:
        sink: receives each completed batch of rows, in step order.
        every_steps: start a copy after this many rows.
        every_s: or when this many seconds passed since the last copy started.

    Raises:
        ValueError: ``every_steps`` < 1 or ``every_s`` <= 0.

    Example:
        >>> rows = []
        >>> buffer = StepBuffer(rows.extend, every_steps=2)
        >>> buffer.add(1, 0, {"loss": torch.tensor(0.5)})
        >>> buffer.add(2, 0, {"loss": torch.tensor(0.25)})
        >>> [row.values["loss"] for row in rows]
        [0.5, 0.25]
    """

    def __init__(
        self, sink: Callable[[list[Row]], None], every_steps: int = 32, every_s: float = 0.1
    ) -> None:
        self._batches = Batches(
            _start, lambda transfer: sink(transfer.result()), every_steps, every_s
        )

    def add(
        self, step: int, epoch: int, values: Mapping[str, Value], now: float | None = None
    ) -> None:
        """Record one step (the buffer keeps ``values``); cheap, and never waits for the device.

        ``now``: the caller's ``time.perf_counter()`` reading of this step, if it has one.
        """
        self._batches.add((step, epoch, values), now)

    def add_all(self, rows: Sequence[tuple[int, int, Mapping[str, Value]]]) -> None:
        """Record several steps at once, in order (as :meth:`add` would one by one)."""
        self._batches.add_all(rows)

    def flush(self) -> None:
        """Ship everything recorded so far and wait for it (pause, epoch end, end of run)."""
        self._batches.flush()


def _start(rows: list[_Row]) -> _Transfer:
    """Stack the rows' tensors into one per device and start copying each to the host."""
    transfer = _Transfer(rows)
    slots: list[tuple[int, str]] = []
    tensors: list[torch.Tensor] = []
    norm_slots: list[tuple[int, str]] = []
    norms: list[Sequence[torch.Tensor]] = []
    for index, (_, _, values) in enumerate(transfer.rows):
        for name, value in values.items():
            kind = type(value)
            if kind is float:
                continue  # already on the host (learning rates)
            if kind is Norms:
                norm_slots.append((index, name))
                norms.append(value.parts)  # type: ignore[union-attr]
            else:
                slots.append((index, name))
                tensors.append(value)  # type: ignore[arg-type]
    columns = _columns(slots, tensors)
    if norms:  # joins the column of its device: still one copy per device
        totals = _total_norms(norms)
        slots, column = columns.get(totals.device, ([], None))
        joined = totals if column is None else torch.cat([column, totals])
        columns[totals.device] = (slots + norm_slots, joined)
    for slots, column in columns.values():
        transfer.parts.append((slots, copy_to_host(column)))
    return transfer


Columns = dict[torch.device, tuple[list[tuple[int, str]], torch.Tensor]]


def _columns(slots: list[tuple[int, str]], tensors: list[torch.Tensor]) -> Columns:
    """The tensors as one float32 vector per device, with the slot of each of its values."""
    if not tensors:
        return {}
    try:  # the usual batch: scalars on one device, stacked in one call
        column = torch.stack(tensors).to(torch.float32)
        if column.ndim == 1:
            return {column.device: (slots, column)}
    except RuntimeError:  # several devices, or a value of shape (1,) among scalars
        pass
    by_device: dict[torch.device, tuple[list[tuple[int, str]], list[torch.Tensor]]] = {}
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
