"""How a loss function reduces, and how to evaluate it per sample.

:func:`describe_loss` reads a loss module (anything with a ``reduction`` attribute), a
function with a ``reduction`` parameter such as ``F.cross_entropy``, or a
``functools.partial`` of one; :func:`call_spec` reads one call of a functional loss from the
options it was called with. Either gives a :class:`LossSpec`: its ``reduction="none"``
evaluation, and, for an unweighted cross-entropy or NLL, a :class:`LossCall` with the options
as they are now, which the copy to the host evaluates for many batches at once (see
:mod:`~onthefly.samples.capture`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

_CLASS_INDEX_FUNCTIONS = (F.cross_entropy, F.nll_loss)

FUNCTIONAL_LOSSES = frozenset(
    {
        F.cross_entropy,
        F.nll_loss,
        F.binary_cross_entropy,
        F.binary_cross_entropy_with_logits,
        F.mse_loss,
        F.l1_loss,
        F.smooth_l1_loss,
        F.huber_loss,
        F.kl_div,
    }
)
"""The functional losses recognised when a training step calls them (see :func:`call_spec`)."""


class LossCall(NamedTuple):
    """An unweighted class-index loss with its options as they are now: evaluated later
    (``reduction="none"``) on the scores a training batch kept, for many batches at once.

    Each sample's value depends on its own row only, so evaluating a concatenation of batches
    gives every sample the same bits as evaluating its batch alone (see
    :attr:`SampleValues.unreduced`).
    """

    fn: Callable[..., torch.Tensor]
    ignore_index: int
    label_smoothing: float = 0.0

    def __call__(self, preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        extra = {"label_smoothing": self.label_smoothing} if self.fn is F.cross_entropy else {}
        return self.fn(preds, target, ignore_index=self.ignore_index, reduction="none", **extra)


def _no_call() -> LossCall | None:
    return None


@dataclass(frozen=True)
class LossSpec:
    """How a loss function reduces, and how to get its unreduced values.

    Attributes:
        unreduced: ``fn(preds, target) -> Tensor`` with ``reduction="none"``.
        reduction: the user's reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        class_index: a class-index loss (cross-entropy / NLL) with weights and ``ignore_index``.
        weight: reads the class weights at call time (``None`` when unweighted).
        ignore_index: reads the target value that is left out at call time (class-index
            losses only, else ``None``).
        deferred: the loss as a :class:`LossCall` with its options now, when it is an
            unweighted cross-entropy or NLL whose per-sample values may be evaluated later;
            ``None`` otherwise (read at every training batch: options may change).
    """

    unreduced: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    reduction: str
    class_index: bool = False
    weight: Callable[[], torch.Tensor | None] = lambda: None
    ignore_index: Callable[[], int | None] = lambda: None
    deferred: Callable[[], LossCall | None] = _no_call


def describe_loss(loss_fn: Any) -> LossSpec | None:
    """How ``loss_fn`` reduces; ``None`` when it offers no ``reduction="none"``.

    Understands ``torch.nn`` loss modules (anything with a ``reduction`` attribute), functions
    with a ``reduction`` parameter such as ``F.cross_entropy``, and ``functools.partial`` of them.

    Example:
        >>> describe_loss(nn.CrossEntropyLoss(reduction="sum")).reduction
        'sum'
        >>> describe_loss(lambda preds, target: (preds - target).abs().mean()) is None
        True
    """
    if isinstance(loss_fn, nn.Module):
        return _module_spec(loss_fn)
    if callable(loss_fn):
        return _function_spec(loss_fn)
    return None


def _module_spec(module: nn.Module) -> LossSpec | None:
    if not isinstance(module.__dict__.get("reduction"), str):
        return None
    class_index = isinstance(module, (nn.CrossEntropyLoss, nn.NLLLoss))
    buffers, options = module._buffers, module.__dict__
    return LossSpec(
        unreduced=_unreduced_call(module),
        reduction=module.__dict__["reduction"],
        class_index=class_index,
        # Read at call time (they may be changed), without nn.Module.__getattr__.
        weight=lambda: buffers.get("weight") if class_index else None,
        ignore_index=lambda: options.get("ignore_index") if class_index else None,
        deferred=_deferred_call(module) if class_index else _no_call,
    )


def _deferred_call(module: nn.Module) -> Callable[[], LossCall | None]:
    """A class-index module's :class:`LossCall` with its options at call time; ``None`` while
    it has class weights (their per-sample division stays with the batch)."""
    fn = F.cross_entropy if isinstance(module, nn.CrossEntropyLoss) else F.nll_loss
    buffers, options = module._buffers, module.__dict__
    smooths = "label_smoothing" in options  # NLLLoss has no such option
    # Asked at every training step: the call is made again only when an option changed.
    made = LossCall(fn, options["ignore_index"], options["label_smoothing"] if smooths else 0.0)

    def deferred() -> LossCall | None:
        nonlocal made
        # Subscripts rather than calls to ``get``: this runs at every training step.
        if "weight" in buffers and buffers["weight"] is not None:
            return None
        ignore = options["ignore_index"]
        smoothing = options["label_smoothing"] if smooths else 0.0
        if ignore != made.ignore_index or smoothing != made.label_smoothing:
            made = LossCall(fn, ignore, smoothing)
        return made

    return deferred


UNTAPPED = "_onthefly_untapped"
"""The attribute of the class a loss module has while its calls are observed
(:class:`~onthefly.samples.slot.LossTap`): the module's own class."""


def _own_class(module: nn.Module) -> type[nn.Module]:
    """``module``'s own class, also while its calls are observed."""
    kind = type(module)
    own: type[nn.Module] = kind.__dict__.get(UNTAPPED, kind)
    return own


def _unreduced_call(module: nn.Module) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``module``'s loss with ``reduction="none"``, reading its options at call time."""
    kind = _own_class(module)
    buffers, options = module._buffers, module.__dict__
    if kind in (nn.CrossEntropyLoss, nn.NLLLoss):  # the usual case: the functional call
        loss_fn = F.cross_entropy if kind is nn.CrossEntropyLoss else F.nll_loss
        smoothing = kind is nn.CrossEntropyLoss

        def class_index(preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            extra = {"label_smoothing": options["label_smoothing"]} if smoothing else {}
            weight, ignore = buffers.get("weight"), options["ignore_index"]
            return loss_fn(
                preds, target, weight=weight, ignore_index=ignore, reduction="none", **extra
            )

        return class_index
    forward = kind.forward  # its own class's, so a tap is not re-entered

    def unreduced(preds: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        saved = options["reduction"]
        options["reduction"] = "none"
        try:
            result: torch.Tensor = forward(module, preds, target)
        finally:
            options["reduction"] = saved
        return result

    return unreduced


def call_spec(fn: Callable[..., Any], options: dict[str, Any]) -> LossSpec:
    """How one call of a functional loss reduces, from the options it was called with.

    Args:
        fn: one of :data:`FUNCTIONAL_LOSSES`.
        options: the call's keyword arguments (the inputs and targets passed positionally).

    Example:
        >>> call_spec(F.mse_loss, {"reduction": "sum"}).reduction
        'sum'
    """
    class_index = fn in _CLASS_INDEX_FUNCTIONS
    weight = options.get("weight")
    ignore = options.get("ignore_index", -100) if class_index else None
    return LossSpec(
        unreduced=functools.partial(fn, **{**options, "reduction": "none"}),
        reduction=str(options.get("reduction", "mean")),
        class_index=class_index,
        weight=lambda: weight if class_index else None,
        ignore_index=lambda: ignore,
        deferred=_fixed_call(fn, options),
    )


def _function_spec(fn: Callable[..., Any]) -> LossSpec | None:
    base, bound = fn, {}
    if isinstance(fn, functools.partial):
        base, bound = fn.func, dict(fn.keywords)
    try:
        parameters = inspect.signature(base).parameters
    except (TypeError, ValueError):
        return None
    if "reduction" not in parameters:
        return None
    defaults = {k: p.default for k, p in parameters.items() if p.default is not p.empty}
    options = {**defaults, **bound}
    class_index = base in _CLASS_INDEX_FUNCTIONS
    weight = options.get("weight")
    ignore = options.get("ignore_index") if class_index else None
    return LossSpec(
        unreduced=functools.partial(fn, reduction="none"),
        reduction=str(options.get("reduction", "mean")),
        class_index=class_index,
        weight=lambda: weight if class_index else None,
        ignore_index=lambda: ignore,
        deferred=_fixed_call(base, options),
    )


_CALL_OPTIONS = frozenset({"weight", "ignore_index", "label_smoothing", "reduction"})
_CALL_OPTIONS |= {"size_average", "reduce"}  # deprecated, and None unless given


def _fixed_call(fn: Callable[..., Any], options: dict[str, Any]) -> Callable[[], LossCall | None]:
    """A class-index function's :class:`LossCall` from the options it is called with; none
    for other functions, class weights, or options it does not know."""
    plain = (
        fn in _CLASS_INDEX_FUNCTIONS
        and options.keys() <= _CALL_OPTIONS
        and all(options.get(name) is None for name in ("weight", "size_average", "reduce"))
    )
    if not plain:
        return _no_call
    call = LossCall(
        fn, int(options.get("ignore_index", -100)), float(options.get("label_smoothing", 0.0))
    )
    return lambda: call
