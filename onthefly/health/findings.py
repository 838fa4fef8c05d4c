"""Findings: what a health check reports, one :class:`~onthefly.protocol.Finding` each.

A finding has a severity (``info``: for the record; ``warning``: likely hurts training;
``error``: training is broken, e.g. non-finite values), a one-line summary that names the
layer or the cause, and ``details`` with the numbers behind it. A healthy run gets ``info``
findings only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from onthefly.protocol import Finding, HealthCheck, Severity

__all__ = ["Finding", "finding", "problems", "rounded"]


def finding(check: HealthCheck, severity: Severity, summary: str, **details: Any) -> Finding:
    """A finding of ``check``.

    Example:
        >>> finding("gradients", "error", "non-finite gradients in net.weight").severity
        'error'
    """
    return Finding(check=check, severity=severity, summary=summary, details=details)


def problems(findings: Iterable[Finding]) -> list[Finding]:
    """The ``warning`` and ``error`` findings."""
    return [f for f in findings if f.severity != "info"]


def rounded(value: float, digits: int = 4) -> float | None:
    """``value`` to ``digits`` significant digits for details; ``None`` when not finite."""
    if not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")
