"""Per-sample losses from the functional losses a training step calls (``F.cross_entropy``, …).

:class:`LossMode` is a ``torch.overrides.TorchFunctionMode``: PyTorch's public mechanism to
see the torch functions called while it is active. The sample tracker enters it when a
training batch starts and leaves it as soon as the step's loss is computed (the first of
``on_before_zero_grad``, ``on_before_backward`` and ``on_train_batch_end``), so it sees the
forward pass and the loss — inline ``F.cross_entropy(logits, y)`` in ``training_step``, a
loss module (its ``forward`` calls the functional loss), or a loss computed inside the model
(Hugging Face models return ``.loss`` computed this way) — and not the backward pass. Once
a watched batch's call proves to be the NLL node of the loss backpropagated, the tracker
reads the next batches' values from their loss instead
(:func:`~onthefly.samples.capture.backward_values`) and enters the mode no more.

Every call goes on exactly as it was made; a call of one of
:data:`~onthefly.samples.loss_spec.FUNCTIONAL_LOSSES` on predictions that carry gradients is
reported to the armed :class:`~onthefly.samples.slot.Slot` (the first one of the batch wins).
Nothing of ``torch`` or of the user's objects is replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode

from onthefly.samples.loss_spec import FUNCTIONAL_LOSSES, call_spec
from onthefly.samples.slot import armed_slot


class LossMode(TorchFunctionMode):
    """Reports the training step's first functional loss call to the armed slot.

    Example:
        >>> mode = LossMode()
        >>> mode.enter()
        >>> mode.leave()
    """

    def __init__(self) -> None:
        super().__init__()
        self.active = False
        self.seen = False  # a recognised loss call reached an armed slot (this batch)

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        # PyTorch leaves the mode while this runs: nothing called here comes back to it.
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func in FUNCTIONAL_LOSSES and len(args) >= 2:
            slot = armed_slot()
            preds = args[0]
            if slot is not None and slot.values is None and _trains(preds):
                self.seen = True
                slot.keep(call_spec(func, kwargs), preds, args[1], result)
        return result

    def enter(self) -> None:
        """Start watching this thread's torch calls (no-op when already watching)."""
        if not self.active:
            self.__enter__()
            self.active = True
            self.seen = False

    def leave(self) -> None:
        """Stop watching (no-op when not watching).

        The mode is left only while it is the innermost one: a mode the step entered and
        has not left yet stays in force, and this one is left at a later call.
        """
        if self.active and _get_current_function_mode() is self:
            self.__exit__(None, None, None)
            self.active = False


def _trains(preds: Any) -> bool:
    # Only a call on predictions with gradients counts: evaluations run under no_grad.
    return isinstance(preds, torch.Tensor) and preds.requires_grad
