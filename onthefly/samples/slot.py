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

import copyreg
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from onthefly.samples.capture import (
    DEFERRED_SCORES,
    NLL_NODE,
    SampleValues,
    backward_values,
    nll,
    training_values,
)
from onthefly.samples.loss_spec import UNTAPPED, LossSpec, describe_loss

log = logging.getLogger(__name__)

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

    def kept_from(self, loss: Any) -> bool:
        """Whether the values kept are those read from ``loss``, about to be backpropagated:
        the loss call reported is the one that loss's NLL node recorded."""
        kept, found = self.values, backward_values(loss, self.n)
        return (
            kept is not None
            and found is not None
            and kept.loss is None
            and kept.unreduced is found.unreduced
            and kept.label is found.label
            and kept.predicted is not None
            and found.predicted is not None
            and kept.predicted.data_ptr() == found.predicted.data_ptr()
            and kept.predicted.shape == found.predicted.shape
        )


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
    """Reports a loss module's calls to the armed slot until :meth:`remove`.

    For the duration of ``fit`` the module's class is switched to a subclass whose
    ``forward`` calls the original one and reports the call (the way the training samplers
    are recorded, :mod:`onthefly.samples.attribution`); :meth:`remove` switches it back. The
    module's parameters, buffers, options and state are untouched, and its name, module
    and ``isinstance`` checks are its own. A forward hook would do the same through PyTorch's
    slower call path for modules with hooks: several microseconds at every call. Pickled or
    copied meanwhile (``torch.save(model)``, ``copy.deepcopy``), the module is its own class,
    untapped. A loss called with keywords is not seen here (the tracker then watches the
    functional calls instead), nor one whose class cannot be switched (the same).

    Args:
        module: the user's loss module.

    Example:
        >>> loss_fn = nn.CrossEntropyLoss()
        >>> tap = LossTap(loss_fn)
        >>> isinstance(loss_fn, nn.CrossEntropyLoss), type(loss_fn).__name__
        (True, 'CrossEntropyLoss')
        >>> tap.remove()
        >>> type(loss_fn) is nn.CrossEntropyLoss
        True
    """

    def __init__(self, module: nn.Module) -> None:
        self.module = module
        self._original = type(module)
        self._tapped = _tapped_class(self._original)
        try:
            module.__class__ = self._tapped
        except TypeError as exc:  # a class whose instances cannot change class
            log.warning("OnTheFly cannot observe the calls of %r (%s)", module, exc)
            self.active = False
        else:
            self.active = True

    def remove(self) -> None:
        """Give the module its own class back."""
        if type(self.module) is self._tapped:
            self.module.__class__ = self._original
        self.active = False


def _tapped_class(cls: type[nn.Module]) -> type[nn.Module]:
    """The subclass of ``cls`` whose ``forward`` reports each call to the armed slot (one per
    class, however many fits tap its modules)."""
    made = _TAPPED.get(cls)
    if made is not None:
        return made

    def tapped_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        # Looked up at each call, as an untapped module would: code that patches the class's
        # forward meanwhile (a profiler, an instrumentation library) is called.
        result = cls.forward(self, *args, **kwargs)
        slot = getattr(_local, "slot", None)  # armed_slot(), inlined: runs at every step
        if slot is not None and slot.values is None and len(args) > 1:
            slot.report(self, args[0], args[1], result)
        return result

    def __reduce_ex__(self: nn.Module, protocol: Any) -> Any:
        # Pickled and copied as the user's class: the copy is not tapped, and a pickle names
        # a class that exists where it is loaded. (Made by copyreg's reconstructor, whose
        # class pickle does not compare with the object's, as it does for __newobj__.)
        made = cls.__reduce_ex__(self, protocol)
        if (
            isinstance(made, tuple)
            and made[0] in (_NEWOBJ, _RECONSTRUCTOR)
            and made[1][0] is tapped
            and len(made[1]) == (1 if made[0] is _NEWOBJ else 3)
        ):
            return (_RECONSTRUCTOR, (cls, object, None), *made[2:])
        return made

    namespace = {
        "forward": tapped_forward,
        "__reduce_ex__": __reduce_ex__,
        UNTAPPED: cls,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    tapped: type[nn.Module] = type(cls.__name__, (cls,), namespace)
    _TAPPED[cls] = tapped
    return tapped


_TAPPED: dict[type[nn.Module], type[nn.Module]] = {}
_NEWOBJ: Any = vars(copyreg)["__newobj__"]  # what object.__reduce_ex__ gives (protocol >= 2)
_RECONSTRUCTOR: Any = vars(copyreg)["_reconstructor"]  # (protocols 0 and 1)
