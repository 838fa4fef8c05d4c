"""Put a run back exactly as it was after a health check probed it.

A check runs forward and backward passes, and sometimes an optimizer step, on the live model.
:func:`preserved` saves everything those can change and restores it in place, so training
afterwards is bit-identical to a run without the check:

* parameter and buffer values (BatchNorm statistics included), copied back into the same
  tensors, so optimizers and hooks that hold them keep working;
* each parameter's ``.grad`` (values, or its absence);
* every module's train/eval mode and the grad mode;
* the optimizers' per-parameter state and param-group settings;
* the random generators: torch (CPU, and CUDA when initialised), Python's and NumPy's.

What it cannot see stays changed: a ``torch.Generator`` the model owns, counters a
``training_step`` keeps on the module, files it writes.
"""

from __future__ import annotations

import contextlib
import copy
import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn


@contextlib.contextmanager
def preserved(model: nn.Module, optimizers: Sequence[torch.optim.Optimizer]) -> Iterator[None]:
    """Restore ``model``, ``optimizers``, modes and random state on exit (also on errors).

    Args:
        model: the module being trained.
        optimizers: its optimizers.

    Example:
        >>> with preserved(model, [optimizer]):  # doctest: +SKIP
        ...     loss_fn(model(x), y).backward()
        ...     optimizer.step()
    """
    tensors = _tensors(model)
    saved_values = [t.detach().clone() for t in tensors]
    params = list(model.parameters())
    # The gradient tensors themselves, and their values: both come back.
    saved_grads = [(p.grad, None if p.grad is None else p.grad.detach().clone()) for p in params]
    modes = [(m, m.training) for m in model.modules()]
    saved_optimizers = [_OptimizerState(o) for o in optimizers]
    grad_enabled = torch.is_grad_enabled()
    python_state, numpy_state = random.getstate(), np.random.get_state()
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        torch.set_grad_enabled(grad_enabled)
        with torch.no_grad():
            for tensor, saved in zip(tensors, saved_values, strict=True):
                tensor.copy_(saved)
        for param, (grad, grad_value) in zip(params, saved_grads, strict=True):
            if grad is not None and grad_value is not None:
                grad.copy_(grad_value)  # the same tensor: gradient views and hooks stay valid
            param.grad = grad
        for module, training in modes:
            module.training = training
        for state in saved_optimizers:
            state.restore()


def _tensors(model: nn.Module) -> list[torch.Tensor]:
    # Shared parameters appear once (named_* deduplicate), so each is restored once.
    return [*model.parameters(), *(b for b in model.buffers() if b is not None)]


class _OptimizerState:
    """An optimizer's state and settings, restored into the same tensors."""

    def __init__(self, optimizer: torch.optim.Optimizer) -> None:
        self.optimizer = optimizer
        self.state = {param: _clone(value) for param, value in optimizer.state.items()}
        self.groups = [
            {key: copy.deepcopy(v) for key, v in group.items() if key != "params"}
            for group in optimizer.param_groups
        ]

    def restore(self) -> None:
        optimizer = self.optimizer
        for param in list(optimizer.state):
            if param not in self.state:  # state the probe created (a first step)
                del optimizer.state[param]
        for param, saved in self.state.items():
            current = optimizer.state.get(param)
            optimizer.state[param] = _copy_into(current, saved)
        for group, saved_group in zip(optimizer.param_groups, self.groups, strict=True):
            for key, value in saved_group.items():
                group[key] = _copy_into(group.get(key), value)


def _clone(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return copy.deepcopy(value)


def _copy_into(current: Any, saved: Any) -> Any:
    """``saved`` written into ``current``'s tensors where shapes match, else a fresh copy."""
    if isinstance(saved, torch.Tensor):
        if isinstance(current, torch.Tensor) and current.shape == saved.shape:
            with torch.no_grad():
                current.copy_(saved)
            return current
        return saved.clone()
    if isinstance(saved, dict):
        base = current if isinstance(current, dict) else {}
        for key in list(base):
            if key not in saved:
                del base[key]
        for key, value in saved.items():
            base[key] = _copy_into(base.get(key), value)
        return base
    return copy.deepcopy(saved)
