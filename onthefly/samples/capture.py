"""Per-sample losses as a by-product of the training step's own loss call.

The training loss itself is never touched: the user's loss function computes it as always, so
training is the same bit for bit. (Reducing ``reduction="none"`` values by hand is *not*
bit-identical: PyTorch's fused reductions sum in a different order.) Alongside that call, on
the same detached predictions and targets, the loss function is evaluated once more with
``reduction="none"`` — the loss function only, never the model; for an unweighted
cross-entropy or NLL on small scores that evaluation is left to the copy to the host
(:class:`~onthefly.samples.loss_spec.LossCall`), once for many batches. For an unweighted
cross-entropy the copy does not even compute the log-softmax again: it keeps the
log-probabilities the loss computed itself, which autograd saved for its backward pass (the
loss's ``grad_fn``'s ``_saved_self``, PyTorch's documented view of saved tensors), and takes
each sample's negative log-likelihood from them: the bits ``reduction="none"`` gives.

Each sample's loss is what the user's loss would give on a batch holding that sample alone:

* per-element losses (tokens, pixels, outputs) are reduced over the non-batch dimensions the
  way the user's ``reduction`` does: ``"sum"`` sums them, ``"mean"`` averages them;
* for class-index losses (``CrossEntropyLoss``, ``NLLLoss``) the mean is weighted as PyTorch
  weights it — divided by the sum of the class weights of the sample's targets — and targets
  equal to ``ignore_index`` are left out; a sample whose targets are all ignored gets ``NaN``
  (and is skipped by the store);
* flattened token batches (``logits[B*T, C]``, ``targets[B*T]``) are folded back to ``B`` samples.

How a loss function reduces: :mod:`onthefly.samples.loss_spec`. Where the values come from
during training: :mod:`onthefly.samples.slot`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from onthefly.samples.loss_spec import LossCall, LossSpec

_SUMMED = ("sum", "batchmean")
"""Reductions whose one-sample value is the sum over the sample's elements (``kl_div``'s
``"batchmean"`` divides by the batch size, which is 1 for a sample alone)."""


class SampleValues(NamedTuple):
    """One training batch's per-sample values, still on the device.

    With one class target per sample, the few operations that remain are left to the host
    (``host_values``), so that each training step launches as few kernels as possible. A
    named tuple: made at every training step, it must be cheap to create.

    Attributes:
        loss: ``[B]``; ``NaN`` for a sample without a valid target. ``None`` while it is left
            to the copy to the host (:attr:`unreduced`).
        correct: ``[B]``, the fraction of the sample's targets predicted right (class-index
            losses with several targets per sample), else ``None``.
        label: ``[B]`` the class target of each sample (one target per sample), else ``None``.
        predicted: ``[B]`` the predicted class (one target per sample), else ``None``; or
            the ``[B, C]`` scores themselves, their argmax left to the host copy (training
            batches, see :meth:`Slot.report`).
        ignore: a sample whose ``label`` equals this has no valid target.
        unreduced: with ``loss`` left out, the loss call that gives it from the kept scores
            (``predicted``) and ``label``: the copy to the host evaluates it once for all its
            batches instead of once per training step.
    """

    loss: torch.Tensor | None
    correct: torch.Tensor | None = None
    label: torch.Tensor | None = None
    predicted: torch.Tensor | None = None
    ignore: int | None = None
    unreduced: LossCall | None = None

    def loss_now(self) -> torch.Tensor:
        """``loss``, evaluated now if it was left to the copy."""
        if self.loss is not None:
            return self.loss
        if self.unreduced is None or self.predicted is None or self.label is None:
            raise ValueError("these values hold no loss, nor the scores and call to compute it")
        return self.unreduced(self.predicted, self.label)


def host_hits(
    loss: np.ndarray, label: np.ndarray, hit: np.ndarray, ignore: int | None
) -> np.ndarray:
    """Finish one-target values on the host: ``NaN`` losses for ignored targets (in place),
    and the correctness from the hits (``1``: the label scored highest; ``-1``: unknown),
    ``NaN`` where unknown."""
    known = np.isfinite(label) & (hit >= 0)
    if ignore is not None:
        ignored = label == ignore
        loss[ignored] = np.nan
        known &= ~ignored
    return np.where(known, hit.astype(np.float32), np.float32(np.nan))


def host_values(
    loss: np.ndarray, label: np.ndarray, predicted: np.ndarray, ignore: int | None
) -> np.ndarray:
    """Finish one-target values on the host: ``NaN`` losses for ignored targets (in place),
    and the correctness from the predicted classes (``NaN`` where unknown)."""
    known = np.isfinite(label) & (predicted >= 0)
    if ignore is not None:
        ignored = label == ignore
        loss[ignored] = np.nan
        known &= ~ignored
    return np.where(known, (predicted == label).astype(np.float32), np.float32(np.nan))


def per_sample(
    spec: LossSpec,
    preds: Any,
    target: Any,
    n: int,
    correctness: bool = True,
    scores: bool = False,
) -> SampleValues | None:
    """Each of the ``n`` samples' loss (and correctness) from one call's inputs.

    Args:
        spec: the loss function, from :func:`describe_loss`.
        preds: the predictions the loss function got.
        target: the targets the loss function got.
        n: the number of samples in the batch.
        correctness: also compute ``correct`` (a caller that keeps the scores may skip it).
        scores: with one class target per sample and no ``correctness``, put the detached
            ``[B, C]`` scores in ``predicted`` (their argmax left to the host copy) when they
            are small, else their argmax.

    Returns:
        The values on the device, or ``None`` when the unreduced loss cannot be split into
        ``n`` samples (e.g. the loss is not per sample).
    """
    if not (isinstance(preds, torch.Tensor) and isinstance(target, torch.Tensor)) or n < 1:
        return None
    # Detached inputs build no graph, so no ``no_grad`` context is needed (it costs time).
    preds, target = preds.detach(), target.detach()
    elements = spec.unreduced(preds, target)
    if (
        spec.class_index
        and elements.ndim == 1
        and target.ndim == 1
        and preds.ndim == 2
        and elements.shape[0] == n
        and not target.is_floating_point()
    ):  # the common case, at every step: one class target per sample
        return _one_target_values(spec, preds, target, elements, correctness, scores)
    if elements.ndim == 0 or elements.numel() % n:
        return None
    if spec.class_index and _is_class_index(preds, target):
        return _class_index_values(spec, preds, target, elements, n, correctness, scores)
    flat = elements.reshape(n, -1).float()
    loss = flat.sum(1) if spec.reduction in _SUMMED else flat.mean(1)
    return SampleValues(loss)


def training_values(
    spec: LossSpec, preds: Any, target: Any, n: int, result: Any = None
) -> SampleValues | None:
    """A training batch's values from its loss call: :func:`per_sample` keeping the scores,
    with the usual case (one class target per sample, small scores) taken first.

    That case launches no kernel at all: the targets are kept with the loss's own
    log-probabilities (read from ``result``'s autograd node, see the module docstring) and
    the NLL call that gives each sample's loss from them, or else with the detached scores
    and the loss call itself (:attr:`SampleValues.unreduced`); the copy to the host
    evaluates that call once for many batches. Scores are kept only in single or double
    precision: autocast, which converts a cross-entropy's half-precision inputs to single
    precision, leaves those as they are, so the later call outside the step's autocast
    region computes the same bits (the log-probabilities are what the loss computed,
    whatever the precision). The checks are a few attribute reads, in one function: this
    runs at every training step, where each Python call costs microseconds, its code no
    longer in the CPU's caches.

    Args:
        spec: the loss function, from :func:`describe_loss`.
        preds: the predictions the loss function got.
        target: the targets it got.
        n: the number of samples in the batch.
        result: what the loss function returned, if known.
    """
    if (
        spec.class_index
        and type(preds) is torch.Tensor
        and type(target) is torch.Tensor
        and preds.ndim == 2
        and target.ndim == 1
    ):
        # The loss call took these: a class-index loss on [B, C] scores has [B] targets.
        rows, classes = preds.shape
        if rows == n and n * classes <= DEFERRED_SCORES and target.dtype is torch.long:
            node: Any = getattr(result, "grad_fn", None)
            if type(node) is NLL_NODE:  # the loss's log-probabilities, saved for backward
                values = nll_values(node, target)
                if values is not None:
                    return values
            call = spec.deferred()
            if call is not None and preds.dtype in _KEPT_EXACT:
                # Class indices need no detaching: they carry no gradient. (A named tuple
                # made with tuple.__new__: its own __new__ is a Python function.)
                kept = (None, None, target, preds.detach(), call.ignore_index, call)
                return tuple.__new__(SampleValues, kept)
    return per_sample(spec, preds, target, n, correctness=False, scores=True)


def nll_values(node: Any, target: torch.Tensor) -> SampleValues | None:
    """A batch's values from its loss's NLL autograd node (:data:`NLL_NODE`), before the
    backward pass releases what the node saved; ``None`` when the node's loss is weighted.

    The node holds what the loss computed with: its input, the log-probabilities, and its
    ``ignore_index``. Without class weights and smoothing (a smoothed cross-entropy ends in
    another node) each sample's loss is its target's negative log-probability, whatever the
    reduction. The values are read from the node rather than from the loss function's
    options: they are what this call used. The log-probabilities are kept as their
    ``.data``: detached, they keep no graph alive; cheaper than ``detach()``, whose shared
    version counter nothing needs here (nothing changes them in place).

    Args:
        node: the ``grad_fn`` of what a class-index loss call returned.
        target: the ``[B]`` class targets it was given (they need no detaching: class indices
            carry no gradient).
    """
    if node._saved_weight is not None:
        return None
    ignore = node._saved_ignore_index  # as the unsigned 64-bit integer the node keeps
    if ignore >= _SIGN:
        ignore -= _SIGN << 1
    call = _NLL_CALLS.get(ignore) or nll(ignore)
    # A named tuple made with tuple.__new__: its own __new__ is a Python function.
    made = (None, None, target, node._saved_self.data, ignore, call)
    return tuple.__new__(SampleValues, made)


_SIGN = 1 << 63


NLL_NODE: Any = type(
    F.nll_loss(torch.zeros(1, 2, requires_grad=True), torch.zeros(1, dtype=torch.long)).grad_fn
)
"""The autograd node of an NLL loss (the last node of a cross-entropy without smoothing):
its ``_saved_self`` is the loss's input, the log-probabilities."""

_NLL_CALLS: dict[int, LossCall] = {}


def backward_values(loss: Any, n: int) -> SampleValues | None:
    """A training batch's values read from the loss about to be backpropagated, when it is a
    class-index cross-entropy's or NLL's own result: the values :func:`training_values` gives
    from that loss call (one ``[n]`` long target per sample, at most
    :data:`DEFERRED_SCORES` scores, unweighted), else ``None``.

    Reading them here needs no watch over the step's calls: the node holds its input and its
    targets until the backward pass releases them. A loss that only ends in another node (a
    regulariser added, a division) is searched for its shallowest NLL node, among its
    first :data:`SEARCHED_NODES` nodes.
    """
    node: Any = getattr(loss, "grad_fn", None)
    if type(node) is not NLL_NODE:  # the usual case (the loss itself) needs no search
        node = _shallowest_nll(node)
        if node is None:
            return None
    scores, target = node._saved_self, node._saved_target
    if (
        scores.ndim != 2
        or scores.shape[0] != n
        or scores.numel() > DEFERRED_SCORES
        or target.ndim != 1
        or target.dtype is not torch.long
    ):
        return None
    return nll_values(node, target)


SEARCHED_NODES = 16
"""Nodes of a loss's graph searched for its NLL node (see :func:`backward_values`)."""


def _shallowest_nll(root: Any) -> Any:
    queue, seen = deque([root]), 0
    while queue and seen < SEARCHED_NODES:
        node = queue.popleft()
        if node is None:
            continue
        if type(node) is NLL_NODE:
            return node
        seen += 1
        queue.extend(next_node for next_node, _ in node.next_functions)
    return None


def nll(ignore_index: int) -> LossCall:
    """The NLL call with ``ignore_index``: the per-sample losses from the log-probabilities
    a cross-entropy or NLL loss computed."""
    made = _NLL_CALLS.get(ignore_index)
    if made is None:
        made = _NLL_CALLS[ignore_index] = LossCall(F.nll_loss, ignore_index)
    return made


_KEPT_EXACT = (torch.float32, torch.float64)


def _is_class_index(preds: torch.Tensor, target: torch.Tensor) -> bool:
    return (
        preds.ndim >= 2
        and not target.is_floating_point()
        and target.shape == preds.shape[:1] + preds.shape[2:]
    )


def _class_index_values(
    spec: LossSpec,
    preds: torch.Tensor,
    target: torch.Tensor,
    elements: torch.Tensor,
    n: int,
    correctness: bool,
    scores: bool = False,
) -> SampleValues:
    if elements.ndim == 1 and target.ndim == 1 and elements.shape[0] == n:
        keep = scores and preds.ndim == 2
        return _one_target_values(spec, preds, target, elements, correctness, keep)
    flat = elements.reshape(n, -1).float()
    targets = target.reshape(n, -1)
    ignore = spec.ignore_index()
    valid = targets != ignore if ignore is not None else None
    right = (preds.argmax(1).reshape(n, -1) == targets).float()
    label = target if target.ndim == 1 and target.shape[0] == n else None
    weight = spec.weight()
    if spec.reduction == "sum":
        loss = flat.sum(1)
    elif weight is None and valid is None:
        loss = flat.mean(1)
    else:
        # PyTorch's weighted mean: the sum of the weighted losses over the sum of the weights
        # of the (non-ignored) targets, here per sample.
        mask = torch.ones_like(flat) if valid is None else valid.float()
        if weight is not None:
            mask = mask * weight.float()[targets.clamp(min=0)]
        loss = flat.sum(1) / mask.sum(1)
    if valid is None:
        correct = right.mean(1)
    else:
        right = right * valid
        counted = valid.sum(1)
        correct = right.sum(1) / counted
        loss = torch.where(counted > 0, loss, torch.nan)
    return SampleValues(loss, correct, label)


DEFERRED_SCORES = 1 << 16
"""Most score elements per batch kept for a deferred argmax (more: the argmax runs at once)."""


def _one_target_values(
    spec: LossSpec,
    preds: torch.Tensor,
    target: torch.Tensor,
    elements: torch.Tensor,
    correctness: bool,
    scores: bool = False,
) -> SampleValues:
    # One class per sample (the common case, on every training step): few small kernels;
    # ignored targets and correctness are settled on the host (see host_values).
    # Alone in a batch, a sample's weighted mean is its weighted loss over its weight.
    loss = elements
    weight = spec.weight()
    if weight is not None and spec.reduction != "sum":
        loss = loss / weight.to(loss.dtype)[target.clamp(min=0)]
    predicted = None
    if correctness or (scores and preds.numel() > DEFERRED_SCORES):
        predicted = preds.argmax(1)
    elif scores:
        predicted = preds
    return SampleValues(loss, None, target, predicted, spec.ignore_index())
