"""The default training and evaluation steps: unpack ``(x, y)``, ``loss_fn(model(x), y)``.

Batches are unpacked by :func:`~onthefly.batches.unpack` (tuples, lists, dicts with common
keys or the trainer's ``batch_keys``), and the model's output is reduced to the predictions
the loss gets by :func:`~onthefly.batches.predictions` (a tensor; the first item of a tuple;
``logits``).

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

from onthefly.batches import BatchKeys, call_model, predictions, unpack
from onthefly.errors import ConfigurationError
from onthefly.native.hooks import Hooks
from onthefly.native.state import StepState
from onthefly.samples.slot import observe


def _loss(
    batch: Any, state: StepState, keys: BatchKeys | None
) -> tuple[torch.Tensor, torch.Tensor, Any]:
    if state.loss_fn is None:
        raise ConfigurationError(
            "the default step needs a loss function; pass loss_fn= to fit() or register your own "
            "step with @trainer.training_step"
        )
    x, y = unpack(batch, keys)
    with state.autocast:
        preds = predictions(call_model(state.model, x))
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
        batch_keys: ``(input_key, target_key)`` of dict batches; ``None``: the common keys
            (see :func:`unpack`).

    Attributes:
        grad_norm: the total gradient norm returned by ``clip_grad_norm_`` at the last step
            (a tensor, before clipping), or ``None`` when not clipping.
    """

    def __init__(
        self, hooks: Hooks, grad_clip_norm: float | None, batch_keys: BatchKeys | None = None
    ) -> None:
        self._hooks = hooks
        self.grad_clip_norm = grad_clip_norm
        self._batch_keys = batch_keys
        self.grad_norm: torch.Tensor | None = None

    def __call__(self, batch: Any, state: StepState) -> dict[str, Any]:
        loss, preds, target = _loss(batch, state, self._batch_keys)
        observe(state.loss_fn, preds, target, loss)  # per-sample losses, when recording
        optimizer, scaler, hooks = state.optimizer, state.scaler, self._hooks.step
        for hook in hooks.before_zero_grad:
            hook(hooks.trainer, hooks.model, optimizer)
        optimizer.zero_grad(set_to_none=True)
        state.backward(loss)
        if scaler.is_enabled():
            # Lightning unscales before on_before_optimizer_step so hooks see true gradients.
            scaler.unscale_(optimizer)
        for hook in hooks.before_optimizer_step:
            hook(hooks.trainer, hooks.model, optimizer)
        if self.grad_clip_norm is not None:
            self.grad_norm = torch.nn.utils.clip_grad_norm_(
                state.model.parameters(), self.grad_clip_norm
            )
        scaler.step(optimizer)
        scaler.update()
        _update_metrics(state, preds, target)
        return {"loss": loss}  # detached once, by checked_output


class DefaultEvaluationStep:
    """The validation/test step used when none is registered: the loss, and metric updates.

    Args:
        batch_keys: as for :class:`DefaultTrainingStep`.
    """

    def __init__(self, batch_keys: BatchKeys | None = None) -> None:
        self._batch_keys = batch_keys

    def __call__(self, batch: Any, state: StepState) -> dict[str, Any]:
        loss, preds, target = _loss(batch, state, self._batch_keys)
        _update_metrics(state, preds, target)
        return {"loss": loss}


def check_batch_keys(keys: Any) -> BatchKeys | None:
    """``keys`` as given to ``Trainer(batch_keys=…)``, checked.

    Raises:
        ConfigurationError: unless ``keys`` is ``None`` or two strings.
    """
    if keys is None:
        return None
    if isinstance(keys, (tuple, list)) and len(keys) == 2 and all(isinstance(k, str) for k in keys):
        return (keys[0], keys[1])
    raise ConfigurationError(
        f"batch_keys={keys!r}; expected (input_key, target_key), two dict keys of the batches"
    )


def checked_output(output: Any, step: str) -> dict[str, Any]:
    """The step's dict with its tensors detached, as the hooks and ``callback_metrics`` get it.

    Raises:
        ConfigurationError: when the step did not return a dict holding a ``"loss"`` tensor.
    """
    # The usual dict is recognised without the ABC checks (this runs at every step).
    usual = type(output) is dict and type(output.get("loss")) is torch.Tensor
    if usual and len(output) == 1:  # the default step's {"loss": loss}
        return {"loss": output["loss"].detach()}
    if not usual and (
        not isinstance(output, Mapping) or not isinstance(output.get("loss"), torch.Tensor)
    ):
        got = f"a dict with keys {sorted(output)}" if isinstance(output, Mapping) else repr(output)
        raise ConfigurationError(
            f"the {step} step returned {got}; expected a dict holding a 'loss' tensor, e.g. "
            "{'loss': loss, 'acc': acc} (other keys become callback_metrics)"
        )
    return {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in output.items()}
