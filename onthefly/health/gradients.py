"""Gradients: per-layer gradient norms and update-to-weight ratios on the current batch.

One forward and backward pass on the current batch, then one step of the optimizers (with
the run's step hooks muted), all undone afterwards. Per parameter it measures the gradient
norm, the weight norm and the update-to-weight ratio ``|Δw| / |w|`` of that real optimizer
step (healthy training typically sits around 1e-3). The norms are reduced on the device and
read back in one copy.

Findings:

* ``error``: a non-finite loss, or NaN / Inf in some gradients (the first one is named);
* ``warning`` exploding: a gradient norm above :data:`EXPLODING_NORM` or an update larger
  than :data:`EXPLODING_RATIO` of the weights (learning rate too high, bad initialisation);
* ``warning`` vanishing: a trainable parameter whose gradient norm is below
  :data:`VANISHING_NORM` (dead units upstream, saturation, a detached branch);
* ``info``: the per-layer table, and parameters that got no gradient at all (unused).
"""

from __future__ import annotations

import torch

from onthefly.health.findings import Finding, finding, rounded
from onthefly.health.preserve import preserved
from onthefly.health.probe import Probe

EXPLODING_NORM = 1e3
EXPLODING_RATIO = 0.5
VANISHING_NORM = 1e-8


def check_gradients(probe: Probe) -> list[Finding]:
    """Measure the gradients of the current batch; see the module docstring.

    Args:
        probe: the run at a batch boundary.
    """
    named = [(n, p) for n, p in probe.model.named_parameters() if p.requires_grad]
    with preserved(probe.model, probe.optimizers):
        probe.zero_grad()
        loss = probe.loss()
        loss.backward()
        with_grad = [(n, p) for n, p in named if p.grad is not None]
        before = [p.detach().clone() for _, p in with_grad]
        grad_norms = _norms([p.grad for _, p in with_grad if p.grad is not None])
        probe.step()
        weight_norms = _norms(before)
        update_norms = _norms([p.detach() - b for (_, p), b in zip(with_grad, before, strict=True)])
        # One copy to the host for the whole table.
        table = torch.stack([grad_norms, weight_norms, update_norms]).tolist() if with_grad else []
    loss_value = float(loss.detach())
    trained = {name for name, _ in with_grad}
    unused = [n for n, _ in named if n not in trained]
    columns = zip(*table, strict=True)
    rows = [_Row(name, *stats) for (name, _), stats in zip(with_grad, columns, strict=True)]
    return _findings(rows, unused, loss_value)


class _Row:
    def __init__(self, name: str, grad: float, weight: float, update: float) -> None:
        self.name, self.grad, self.weight = name, grad, weight
        # A parameter initialised to zero (a bias) has no meaningful ratio on its first step.
        self.ratio = update / weight if weight > 0 else 0.0

    def finite(self) -> bool:
        return all(v == v and abs(v) != float("inf") for v in (self.grad, self.weight))

    def as_details(self) -> dict[str, object]:
        return {
            "parameter": self.name,
            "grad_norm": rounded(self.grad),
            "weight_norm": rounded(self.weight),
            "update_ratio": rounded(self.ratio),
        }


def _norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    if not tensors:
        return torch.zeros(0)
    return torch.stack(list(torch._foreach_norm([t.float() for t in tensors])))


def _findings(rows: list[_Row], unused: list[str], loss: float) -> list[Finding]:
    layers = [row.as_details() for row in rows]
    out: list[Finding] = []
    if loss != loss or abs(loss) == float("inf"):
        out.append(finding("gradients", "error", f"the loss is {loss}", loss=None))
    broken = [row.name for row in rows if not row.finite()]
    if broken:
        out.append(
            finding(
                "gradients",
                "error",
                f"NaN or Inf gradients in {len(broken)} parameter(s), first: {broken[0]}",
                parameters=broken,
            )
        )
    finite = [row for row in rows if row.finite()]
    exploding = [r for r in finite if r.grad > EXPLODING_NORM or r.ratio > EXPLODING_RATIO]
    if exploding:
        worst = max(exploding, key=lambda r: r.ratio)
        out.append(
            finding(
                "gradients",
                "warning",
                f"exploding updates in {len(exploding)} parameter(s): {worst.name} has gradient "
                f"norm {worst.grad:.3g} and an update of {worst.ratio:.3g}x its weights "
                "(learning rate too high or bad initialisation?)",
                parameters=[r.name for r in exploding],
                worst=worst.as_details(),
            )
        )
    vanishing = [r for r in finite if r.grad < VANISHING_NORM]
    if vanishing:
        out.append(
            finding(
                "gradients",
                "warning",
                f"vanishing gradients in {len(vanishing)} parameter(s), first: "
                f"{vanishing[0].name} (norm {vanishing[0].grad:.3g}): dead units, saturation "
                "or a detached branch upstream?",
                parameters=[r.name for r in vanishing],
            )
        )
    if unused:
        out.append(
            finding(
                "gradients",
                "info",
                f"{len(unused)} trainable parameter(s) got no gradient (unused in this step), "
                f"first: {unused[0]}",
                parameters=unused,
            )
        )
    largest = max(rows, key=lambda r: r.ratio).name if rows else None
    out.append(
        finding(
            "gradients",
            "info",
            f"{len(rows)} parameter(s) with gradients; largest update ratio: {largest}",
            layers=layers,
        )
    )
    return out
