"""Determinism: is one training step reproducible, bit for bit?

The current batch is replayed twice from the same model, optimizer and random state (each
replay inside :func:`~onthefly.health.preserve.preserved`, so both start from exactly the
same place). Losses and every gradient are compared bit for bit. When they differ, the
finding names the first parameter whose gradient differs and the first module whose output
differs (forward hooks, removed afterwards), and the likely cause:

* a module output differs: its forward draws randomness outside torch's global generators
  (its own ``torch.Generator``, time, ``os.urandom``) or runs a nondeterministic kernel;
* only gradients differ: nondeterministic backward kernels (atomic adds on the GPU in
  ``index_add`` / ``scatter_add`` / embedding backward, cuDNN autotuning).

A third replay from a different random state tells whether the step depends on the seed at
all (dropout, random layers): an ``info`` finding, since that is reproducible given the seed.
The batch is the same in every replay, so the data order never explains a difference here.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from onthefly.health.findings import Finding, finding, rounded
from onthefly.health.preserve import preserved
from onthefly.health.probe import Probe

_OTHER_SEED = 0x5EED


@dataclass
class _Replay:
    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    first_changed_module: str | None = None


def check_determinism(probe: Probe) -> list[Finding]:
    """Replay the current batch twice and compare; see the module docstring.

    Args:
        probe: the run at a batch boundary.
    """
    first = _replay(probe, reference=None)
    second = _replay(probe, reference=first.outputs)
    with preserved(probe.model, probe.optimizers):
        torch.manual_seed(_OTHER_SEED)
        reseeded = probe.loss().detach()
    same_loss = _same(first.loss, second.loss)
    differing = next(
        (name for name in first.grads if not _same_grad(first.grads[name], second.grads[name])),
        None,
    )
    findings: list[Finding] = []
    if same_loss and differing is None:
        findings.append(
            finding(
                "determinism",
                "info",
                f"two replays of the step are bit-identical (loss and {len(first.grads)} "
                "gradients)",
                parameters_compared=len(first.grads),
            )
        )
    else:
        findings.append(_difference(probe, first, second, same_loss, differing))
    if not _same(first.loss, reseeded):
        findings.append(
            finding(
                "determinism",
                "info",
                "the step depends on the random state (dropout or random layers): it is "
                "reproducible only with a fixed seed",
                loss=rounded(float(first.loss)),
                loss_other_seed=rounded(float(reseeded)),
            )
        )
    return findings


def _difference(
    probe: Probe, first: _Replay, second: _Replay, same_loss: bool, parameter: str | None
) -> Finding:
    module = second.first_changed_module
    if module is not None:
        kind = type(probe.model.get_submodule(module)).__name__ if module else "the model"
        where = f"the output of {module or 'the model'} ({kind}) differs first"
        cause = (
            "its forward draws randomness outside torch's global generators (its own "
            "torch.Generator, time, os.urandom) or runs a nondeterministic kernel"
        )
    elif not same_loss:
        where, cause = "the loss differs while every module output matches", "the loss function"
    else:
        where = "the forward pass matches but gradients differ"
        cause = (
            "nondeterministic backward kernels (atomic adds in index_add / scatter_add / "
            "embedding backward, cuDNN autotuning); try torch.use_deterministic_algorithms(True)"
        )
    diff = _max_diff(first.grads.get(parameter or ""), second.grads.get(parameter or ""))
    named = f"first differing gradient: {parameter}" if parameter else "gradients match"
    return finding(
        "determinism",
        "warning",
        f"two replays of the same step differ: {named}; {where}. Likely cause: {cause}",
        first_parameter=parameter,
        first_module=module,
        loss_equal=same_loss,
        loss_first=rounded(float(first.loss), 8),
        loss_second=rounded(float(second.loss), 8),
        max_abs_diff=None if diff is None else rounded(diff),
        likely_cause=cause,
    )


def _replay(probe: Probe, reference: dict[str, torch.Tensor] | None) -> _Replay:
    with preserved(probe.model, probe.optimizers), _recording(probe.model, reference) as seen:
        probe.zero_grad()
        loss = probe.loss()
        loss.backward()
        grads = {
            name: None if p.grad is None else p.grad.detach().clone()
            for name, p in probe.model.named_parameters()
        }
    return _Replay(loss.detach(), grads, seen.outputs, seen.first_changed)


@dataclass
class _Seen:
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)
    first_changed: str | None = None


@contextmanager
def _recording(model: nn.Module, reference: dict[str, torch.Tensor] | None) -> Iterator[_Seen]:
    """Record each module's first output, or compare it with ``reference`` (temporary hooks)."""
    seen = _Seen()

    def hook_for(name: str) -> Any:
        def hook(module: nn.Module, args: Any, output: Any) -> None:
            tensor = _first_tensor(output)
            if tensor is None or name in seen.outputs:
                return
            seen.outputs[name] = tensor.detach().clone()
            if reference is not None and seen.first_changed is None:
                expected = reference.get(name)
                if expected is None or not _same(expected, tensor.detach()):
                    seen.first_changed = name

        return hook

    handles = [m.register_forward_hook(hook_for(n)) for n, m in model.named_modules()]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def _first_tensor(output: Any) -> torch.Tensor | None:
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)):
        return next((o for o in output if isinstance(o, torch.Tensor)), None)
    if isinstance(output, dict):
        return next((o for o in output.values() if isinstance(o, torch.Tensor)), None)
    return None


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality, NaNs in the same places counting as equal."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return (
        bool(((a == b) | (a.isnan() & b.isnan())).all())
        if a.is_floating_point()
        else bool(torch.equal(a, b))
    )


def _same_grad(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return _same(a, b)


def _max_diff(a: torch.Tensor | None, b: torch.Tensor | None) -> float | None:
    if a is None or b is None or a.shape != b.shape:
        return None
    return float((a.double() - b.double()).abs().max())
