"""A trial step: an edit's new values tried on the optimizer's own update, on a copy.

A value can be representable and still fail inside the optimizer: Adam divides ``lr`` by its
bias correction (0.1 at the first step), so ``lr=1e38`` overflows float32 there; AdamW
multiplies ``lr`` by ``weight_decay``. So before an edit is applied, :func:`trial` builds an
optimizer of the same class over a one-element copy of each (dtype, device) of the edited
group's parameters, with that parameter's first gradient entry and state entries (its step
count included), and runs one real step of it: with the new values, and with the old ones. An
edit is refused when the new values raise, or turn the copy into an infinity or NaN, where the
old ones did not. When the trial cannot even run with the old values (an optimizer whose
constructor takes other arguments, or whose state is not per element), it proves nothing and
the edit goes on to the guard (:mod:`onthefly.callbacks._step_guard`).

Costs a few hundred microseconds per edited group; touches neither the optimizer nor the
random generators (the trial runs in a forked RNG state).
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from onthefly.errors import ConfigurationError


def trial(optimizer: torch.optim.Optimizer, group: int, new: dict[str, Any]) -> None:
    """Refuse ``new`` values for param group ``group`` that the optimizer's step fails on.

    Raises:
        ConfigurationError: the step raised or made a parameter non-finite with ``new`` but
            not with the group's current values (the message says which and why).
    """
    if _outcome(optimizer, group, {}) is not None:
        return  # the trial itself cannot run: it proves nothing
    failure = _outcome(optimizer, group, new)
    if failure is not None:
        shown = ", ".join(f"{name}={value!r}" for name, value in new.items())
        raise ConfigurationError(
            f"{type(optimizer).__name__}'s next step would fail with {shown} on param group "
            f"{group} ({failure}); expected values it can step with (nothing was changed)"
        )


def _outcome(optimizer: torch.optim.Optimizer, index: int, overrides: dict[str, Any]) -> str | None:
    """``None`` when one step of a copy of group ``index`` (with ``overrides``) went well,
    else what went wrong."""
    group = optimizer.param_groups[index]
    hyper = {key: value for key, value in group.items() if key != "params"}
    hyper.update({k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()})
    # A value held as a tensor (capturable / fused optimizers) is copied, not shared.
    hyper = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in hyper.items()}
    originals = _one_per_kind(group["params"])
    probes = [torch.nn.Parameter(_first(p.detach(), p).clone()) for p in originals]
    for probe, original in zip(probes, originals, strict=True):
        grad = original.grad
        probe.grad = torch.ones_like(probe) if grad is None else _first(grad.detach(), grad).clone()
    devices = sorted({p.device.index or 0 for p in probes if p.device.type == "cuda"})
    with torch.random.fork_rng(devices=devices):
        try:
            make: Any = type(optimizer)  # the user's class: its own constructor
            copy_ = make([{"params": probes, **hyper}])
            for probe, original in zip(probes, originals, strict=True):
                state = optimizer.state.get(original, {})
                copy_.state[probe] = {k: _state_entry(v, original) for k, v in state.items()}
            copy_.step()
        except Exception as exc:  # whatever the step raises is the answer
            return f"{type(exc).__name__}: {_first_line(exc)}"
    if not all(bool(torch.isfinite(p).all()) for p in probes):
        return "a parameter would become infinite or NaN"
    return None


def _one_per_kind(params: list[torch.Tensor]) -> list[torch.Tensor]:
    """One parameter of each (dtype, device) of a group (the kernels differ by both)."""
    seen: dict[tuple[torch.dtype, torch.device], torch.Tensor] = {}
    for param in params:
        if param.numel():
            seen.setdefault((param.dtype, param.device), param)
    return list(seen.values())


def _first(tensor: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return tensor.reshape(-1)[:1] if tensor.shape == like.shape else tensor


def _state_entry(value: Any, param: torch.Tensor) -> Any:
    if isinstance(value, torch.Tensor):
        return _first(value.detach(), param).clone()
    return copy.deepcopy(value)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
