"""The default training and evaluation steps: unpack ``(x, y)``, ``loss_fn(model(x), y)``.

The default training step does what a plain PyTorch loop does, in Lightning's hook order::

    forward under autocast -> on_before_zero_grad -> optimizer.zero_grad(set_to_none=True)
    -> on_before_backward -> backward (through the scaler) -> on_after_backward
    -> [unscale with AMP] -> on_before_optimizer_step -> [clip_grad_norm_] -> optimizer step

Zeroing after the forward pass (as Lightning does) gives the same numbers as zeroing before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from onthefly.errors import ConfigurationError
from onthefly.native.hooks import Hooks
from onthefly.native.state import StepState
from onthefly.samples.slot import observe

INPUT_KEYS = ("x", "input", "inputs")
TARGET_KEYS = ("y", "target", "targets", "label", "labels")


def unpack(batch: Any) -> tuple[Any, Any]:
    """Split a batch into ``(inputs, targets)``.

    Accepts ``(x, y, ...)`` tuples or lists (extra items are ignored) and dicts keyed by one of
    :data:`INPUT_KEYS` and one of :data:`TARGET_KEYS`.

    Raises:
        ConfigurationError: for any other batch.
    """
    if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) >= 2:
        return batch[0], batch[1]
    if isinstance(batch, Mapping):
        x_key = next((k for k in INPUT_KEYS if k in batch), None)
        y_key = next((k for k in TARGET_KEYS if k in batch), None)
        if x_key is not None and y_key is not None:
            return batch[x_key], batch[y_key]
        found = ", ".join(repr(k) for k in batch)
        raise ConfigurationError(
            f"the default step found no input/target in a dict batch with keys {found}; expected "
            f"one of {INPUT_KEYS} and one of {TARGET_KEYS}, or register your own step with "
            "@trainer.training_step (and @trainer.validation_step)"
        )
    raise ConfigurationError(
        f"the default step cannot unpack a batch of type {type(batch).__name__}; expected an "
        "(x, y, ...) tuple/list or a dict with input and target keys, or register your own step "
        "with @trainer.training_step (and @trainer.validation_step)"
    )


def batch_size(batch: Any) -> int:
    """The number of samples in a batch: the first dimension of its first tensor (1 if none)."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    items = batch.values() if isinstance(batch, Mapping) else batch
    if isinstance(batch, (Mapping, tuple, list)):
        for value in items:
            if isinstance(value, torch.Tensor) and value.dim():
                return int(value.shape[0])
    return 1


def _loss(batch: Any, state: StepState) -> tuple[torch.Tensor, torch.Tensor, Any]:
    if state.loss_fn is None:
        raise ConfigurationError(
            "the default step needs a loss function; pass loss_fn= to fit() or register your own "
            "step with @trainer.training_step"
        )
    x, y = unpack(batch)
    with state.autocast:
        preds = state.model(x)
        try:
            loss = state.loss_fn(preds, y)
        except Exception as exc:
            if isinstance(preds, torch.Tensor):
                raise  # the user's loss and tensors: their error is the clearest
            raise ConfigurationError(_unusable_output(preds, exc)) from exc
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        tensor = isinstance(loss, torch.Tensor)
        got = f"a tensor of shape {tuple(loss.shape)}" if tensor else repr(loss)
        raise ConfigurationError(
            f"loss_fn returned {got}; the default step expected a scalar tensor to call "
            "backward() on (a loss with reduction='none' needs .mean()), or register your own "
            "step with @trainer.training_step"
        )
    return loss, preds, y


def _unusable_output(preds: Any, exc: Exception) -> str:
    if isinstance(preds, Mapping):
        what = f"a {type(preds).__name__} with keys {sorted(map(str, preds))}"
        fix = "loss_fn=lambda out, y: F.cross_entropy(out['logits'], y)"
    elif isinstance(preds, Sequence) and not isinstance(preds, str):
        what = f"a {type(preds).__name__} of {len(preds)} items"
        fix = "loss_fn=lambda out, y: F.cross_entropy(out[0], y)"
    else:
        what = f"a {type(preds).__name__}"
        fix = "a loss_fn that takes this output"
    return (
        f"the model returned {what}, which loss_fn could not take ({type(exc).__name__}: {exc}); "
        "the default step computes loss_fn(model(x), y): return a tensor from forward, pass a "
        f"loss_fn that takes the output (e.g. {fix}), or register your own step with "
        "@trainer.training_step (and @trainer.validation_step)"
    )


def _update_metrics(state: StepState, preds: torch.Tensor, target: Any) -> None:
    if state.metrics:
        preds = preds.detach()
        for metric in state.metrics.values():
            metric.update(preds, target)


class DefaultTrainingStep:
    """The training step used when none is registered.

    Args:
        hooks: the run's hook dispatcher.
        grad_clip_norm: clip the global gradient norm to this value; ``None`` never clips.

    Attributes:
        grad_norm: the total gradient norm returned by ``clip_grad_norm_`` at the last step
            (a tensor, before clipping), or ``None`` when not clipping.
    """

    def __init__(self, hooks: Hooks, grad_clip_norm: float | None) -> None:
        self._hooks = hooks
        self._grad_clip_norm = grad_clip_norm
        self.grad_norm: torch.Tensor | None = None

    def __call__(self, batch: Any, state: StepState) -> dict[str, Any]:
        loss, preds, target = _loss(batch, state)
        observe(state.loss_fn, preds, target)  # per-sample losses, when recording
        optimizer, scaler = state.optimizer, state.scaler
        self._hooks.call("on_before_zero_grad", optimizer)
        optimizer.zero_grad(set_to_none=True)
        state.backward(loss)
        if scaler.is_enabled():
            # Lightning unscales before on_before_optimizer_step so hooks see true gradients.
            scaler.unscale_(optimizer)
        self._hooks.call("on_before_optimizer_step", optimizer)
        if self._grad_clip_norm is not None:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(
                state.model.parameters(), self._grad_clip_norm
            )
        scaler.step(optimizer)
        scaler.update()
        _update_metrics(state, preds, target)
        return {"loss": loss}  # detached once, by checked_output


def default_evaluation_step(batch: Any, state: StepState) -> dict[str, Any]:
    """The validation/test step used when none is registered: the loss, and metric updates."""
    loss, preds, target = _loss(batch, state)
    _update_metrics(state, preds, target)
    return {"loss": loss}


def checked_output(output: Any, step: str) -> dict[str, Any]:
    """The step's dict with its tensors detached, as the hooks and ``callback_metrics`` get it.

    Raises:
        ConfigurationError: when the step did not return a dict holding a ``"loss"`` tensor.
    """
    # The usual dict is recognised without the ABC checks (this runs at every step).
    usual = type(output) is dict and type(output.get("loss")) is torch.Tensor
    if not usual and (
        not isinstance(output, Mapping) or not isinstance(output.get("loss"), torch.Tensor)
    ):
        got = f"a dict with keys {sorted(output)}" if isinstance(output, Mapping) else repr(output)
        raise ConfigurationError(
            f"the {step} step returned {got}; expected a dict holding a 'loss' tensor, e.g. "
            "{'loss': loss, 'acc': acc} (other keys become callback_metrics)"
        )
    return {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in output.items()}
