"""The determinism check: bit-identical replays, a planted nondeterministic module, dropout."""

from __future__ import annotations

import torch

from onthefly.health import check_determinism, problems
from tests.health.models import healthy, nondeterministic, probe_of, with_dropout


def test_a_healthy_model_replays_bit_identically() -> None:
    findings = check_determinism(probe_of(healthy()))
    assert problems(findings) == []
    assert "bit-identical" in findings[0].summary
    assert findings[0].details["parameters_compared"] == 4


def test_a_module_with_its_own_generator_is_named() -> None:
    model = nondeterministic()
    findings = problems(check_determinism(probe_of(model)))
    assert len(findings) == 1
    found = findings[0]
    assert found.severity == "warning"
    # The first parameter in model order whose gradient differs, and the module at fault.
    assert found.details["first_parameter"] == "0.weight"
    assert found.details["first_module"] == "1"
    assert "Noisy" in found.summary and "0.weight" in found.summary
    assert "torch.Generator" in found.details["likely_cause"]
    assert found.details["loss_equal"] is False


def test_dropout_is_reproducible_but_depends_on_the_seed() -> None:
    findings = check_determinism(probe_of(with_dropout()))
    assert problems(findings) == []
    assert any("depends on the random state" in f.summary for f in findings)


def test_the_run_is_untouched() -> None:
    model = with_dropout()
    probe = probe_of(model)
    before = [p.detach().clone() for p in model.parameters()]
    rng = torch.get_rng_state()
    check_determinism(probe)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(rng, torch.get_rng_state())
