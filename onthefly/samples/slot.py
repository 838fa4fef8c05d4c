"""Where a training batch's per-sample values are reported: the slot armed for the batch.

:class:`LossTap` hooks a loss *module*'s calls for the duration of ``fit`` (both drivers),
:class:`~onthefly.samples.loss_mode.LossMode` sees the functional losses a training step
calls, and the native trainer's default step calls :func:`observe` for plain loss
functions; all report to the :class:`Slot` armed for the current training batch on the
training thread, which keeps the first value (computed by
:func:`~onthefly.samples.capture.per_sample`). A ``per_sample_loss`` that the step returns
itself wins over the slot's value (the tracker reads it at the batch's end).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from onthefly.samples.capture import (
    DEFERRED_SCORES,
    NLL_NODE,
    SampleValues,
    nll,
    training_values,
)
from onthefly.samples.loss_spec import LossSpec, describe_loss

NO_NLL: tuple[Any, int, int | None, Any] = (None, 0, None, None)


@dataclass
class Slot:
    """Receives the per-sample values of one training batch (the first report wins).

    Attributes:
        n: the number of samples in the batch.
        values: what was reported, or ``None``.
        specs: loss descriptions by ``id`` of the loss function, shared across batches so
            that each loss function is described once per run.
    """

    n: int
    values: SampleValues | None = None
    specs: dict[int, LossSpec | None] = field(default_factory=dict)
    _last: tuple[Any, LossSpec | None] = field(default=(None, None), repr=False)
    # The loss whose values came from its NLL node, the node's ignore_index (as the node
    # keeps it), the values' and the NLL call: the first thing report() tries.
    _nll: tuple[Any, int, int | None, Any] = field(default=NO_NLL, repr=False)

    def report(self, loss_fn: Any, preds: Any, target: Any, result: Any = None) -> None:
        """Compute and keep the batch's values from one loss call (if none were kept yet).

        Only a call on predictions that carry gradients counts: an evaluation run from a
        command while the batch is in progress (a test, a scan) runs under ``no_grad``.
        ``result``: what the call returned, when known (its autograd node may hold the
        log-probabilities the values are taken from).
        """
        trains = (
            preds.requires_grad
            if type(preds) is torch.Tensor  # the usual case first: no call
            else getattr(preds, "requires_grad", False)
        )
        if self.values is not None or not trains:
            return
        # The usual case first, in this function (each call costs microseconds in a training
        # step, the code no longer in the CPU's caches): the loss of the last batch, ending
        # in its NLL node as then, with the same ignore_index, still unweighted.
        repeat, ignore, kept, call = self._nll
        if loss_fn is repeat and type(target) is torch.Tensor:
            node: Any = getattr(result, "grad_fn", None)
            if (
                type(node) is NLL_NODE
                and node._saved_ignore_index == ignore
                and node._saved_weight is None
                and target.ndim == 1
                and target.shape[0] == self.n
                and target.dtype is torch.long
            ):
                scores = node._saved_self
                if scores.numel() <= DEFERRED_SCORES:
                    made = (None, None, target, scores.data, kept, call)  # see nll_values
                    self.values = tuple.__new__(SampleValues, made)
                    return
        last, spec = self._last
        if loss_fn is not last:  # the usual case: the same loss as the last batch's
            key = id(loss_fn)
            if key not in self.specs:
                self.specs[key] = describe_loss(loss_fn)
            spec = self.specs[key]
            self._last = (loss_fn, spec)
        if spec is None:
            return
        self.values = values = training_values(spec, preds, target, self.n, result)
        node = getattr(result, "grad_fn", None)
        if (
            values is not None
            and type(node) is NLL_NODE
            and values.ignore is not None
            and values.unreduced is nll(values.ignore)
        ):
            self._nll = (loss_fn, node._saved_ignore_index, values.ignore, values.unreduced)
        elif self._nll[0] is loss_fn:
            self._nll = NO_NLL

    def keep(self, spec: LossSpec, preds: Any, target: Any, result: Any = None) -> None:
        """Compute and keep the batch's values from a described loss call."""
        self.values = training_values(spec, preds, target, self.n, result)


CLOSED = SampleValues(None)
"""What a slot armed for a whole run holds between its training batches: a value already, so
no loss call reports to it (each report path takes a slot whose ``values`` are ``None``)."""

_local = threading.local()


def armed_slot() -> Slot | None:
    """The slot of the training batch in progress on this thread, if one is armed."""
    slot: Slot | None = getattr(_local, "slot", None)
    return slot


def arm(slot: Slot | None) -> None:
    """Arm ``slot`` on this thread; ``None`` disarms.

    A slot may stay armed across batches: between two, its ``values`` are :data:`CLOSED`.
    """
    _local.slot = slot


def observe(loss_fn: Any, preds: Any, target: Any, result: Any = None) -> None:
    """Report one loss call to the armed slot; a no-op outside a training batch.

    The native trainer's default step calls it after its ``loss_fn(model(x), y)``; custom
    code may call it too.

    Args:
        loss_fn: the loss function called.
        preds: its predictions.
        target: its targets.
        result: what it returned (optional).
    """
    slot = getattr(_local, "slot", None)  # armed_slot(), inlined: runs at every step
    if slot is not None and slot.values is None:
        slot.report(loss_fn, preds, target, result)


class LossTap:
    """Reports a loss module's calls to the armed slot, through a forward hook.

    A forward hook (``register_forward_hook``) is PyTorch's public way to observe a module's
    calls: the module itself is not changed, and :meth:`remove` takes the hook away.

    Args:
        module: the user's loss module.

    Example:
        >>> tap = LossTap(nn.CrossEntropyLoss())
        >>> tap.remove()
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module

        # A hook without keyword arguments: PyTorch's slower path for hooks that take them
        # costs microseconds at every call. A loss called with keywords is not seen here
        # (the tracker then watches the functional calls instead).
        def hook(module: nn.Module, args: Any, result: Any) -> None:
            slot = getattr(_local, "slot", None)  # armed_slot(), inlined: runs at every step
            if slot is not None and slot.values is None and len(args) > 1:
                slot.report(module, args[0], args[1], result)

        self._handle = module.register_forward_hook(hook)

    def remove(self) -> None:
        """Take the hook away."""
        self._handle.remove()
