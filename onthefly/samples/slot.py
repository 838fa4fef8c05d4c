"""Where a training batch's per-sample values are reported: the slot armed for the batch.

:class:`LossTap` wraps a loss *module*'s ``forward`` for the duration of ``fit`` (both
drivers) and the native trainer's default step calls :func:`observe` for plain loss
functions; both report to the :class:`Slot` armed for the current training batch on the
training thread, which keeps the first value (computed by
:func:`~onthefly.samples.capture.per_sample`). A ``per_sample_loss`` that the step returns
itself wins over the slot's value (the tracker reads it at the batch's end).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from onthefly.samples.capture import LossSpec, SampleValues, describe_loss, per_sample


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

    def report(self, loss_fn: Any, preds: Any, target: Any) -> None:
        """Compute and keep the batch's values from one loss call (if none were kept yet).

        Only a call on predictions that carry gradients counts: an evaluation run from a
        command while the batch is in progress (a test, a scan) runs under ``no_grad``.
        """
        if self.values is not None or not getattr(preds, "requires_grad", False):
            return
        key = id(loss_fn)
        if key not in self.specs:
            self.specs[key] = describe_loss(loss_fn)
        spec = self.specs[key]
        if spec is None:
            return
        # With one class target per sample the (small) scores are kept and the copy to the
        # host takes one argmax for many batches, instead of one kernel per step.
        self.values = per_sample(spec, preds, target, self.n, correctness=False, scores=True)


_local = threading.local()


def armed_slot() -> Slot | None:
    """The slot of the training batch in progress on this thread, if one is armed."""
    slot: Slot | None = getattr(_local, "slot", None)
    return slot


def arm(slot: Slot | None) -> None:
    """Arm ``slot`` on this thread for one training batch; ``None`` disarms."""
    _local.slot = slot


def observe(loss_fn: Any, preds: Any, target: Any) -> None:
    """Report one loss call to the armed slot; a no-op outside a training batch.

    The native trainer's default step calls it after its ``loss_fn(model(x), y)``; custom
    code may call it too.
    """
    slot = armed_slot()
    if slot is not None and slot.values is None:
        slot.report(loss_fn, preds, target)


class LossTap:
    """Wraps a loss module's ``forward`` so its calls report to the armed slot.

    Only the module instance is changed (an instance attribute shadows the class's
    ``forward``), and :meth:`remove` puts it back.

    Args:
        module: the user's loss module.

    Example:
        >>> tap = LossTap(nn.CrossEntropyLoss())
        >>> tap.remove()
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self._own = module.__dict__.get("forward")
        original = self._own if self._own is not None else module.forward

        def forward(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            slot = getattr(_local, "slot", None)  # armed_slot(), inlined: runs at every step
            if slot is not None and slot.values is None:
                preds = args[0] if args else kwargs.get("input")
                target = args[1] if len(args) > 1 else kwargs.get("target")
                slot.report(module, preds, target)
            return result

        module.__dict__["forward"] = forward

    def remove(self) -> None:
        """Restore the module's own ``forward``."""
        if self._own is None:
            self.module.__dict__.pop("forward", None)
        else:
            self.module.__dict__["forward"] = self._own
