"""The throughput check: the step split, and the loader named when it is the bottleneck."""

from __future__ import annotations

from onthefly.health import ObservedTiming, check_throughput, problems
from tests.health.models import healthy, probe_of


def test_a_compute_bound_run_gets_the_split() -> None:
    findings = check_throughput(probe_of(healthy()), ObservedTiming(10, 1.0, 0.01))
    assert problems(findings) == []
    details = findings[0].details
    assert details["observed_steps"] == 10
    assert {"forward_ms", "backward_ms", "optimizer_ms", "other_ms"} <= set(details)
    assert details["data_wait_ms"] == 1.0
    assert details["bottleneck"] == "other"  # 100 ms observed per step, far above the probes


def test_a_data_bound_run_names_the_loader() -> None:
    findings = problems(check_throughput(probe_of(healthy()), ObservedTiming(10, 0.01, 1.0)))
    assert len(findings) == 1
    assert findings[0].details["bottleneck"] == "data_wait"
    assert "data loading is the bottleneck" in findings[0].summary


def test_without_observed_steps_the_data_wait_is_unknown() -> None:
    findings = check_throughput(probe_of(healthy()), ObservedTiming())
    assert findings[0].details["data_wait_ms"] is None
    assert "too few steps observed" in findings[0].summary
