"""Health checks: structured findings about a training run, computed at a batch boundary.

=============  ==================================================================  ===========
check          what it detects                                                     input
=============  ==================================================================  ===========
determinism    two replays of one step differ (names the parameter, the module     probe
               and the likely cause); the step's dependence on the seed
gradients      per-layer gradient norms and update-to-weight ratios; exploding,    probe
               vanishing, NaN / Inf gradients; unused parameters
instability    loss and gradient-norm spikes, non-finite steps, AMP skipped        history
               steps, zero learning rates and learning-rate jumps
activations    dead (rectifiers) and saturated (sigmoid, tanh, ...) unit           probe
               fractions per layer
throughput     step time split into data wait / forward / backward / optimizer     probe + run
distribution   the ranks of a distributed run: positions, and every parameter,     all ranks
               buffer and optimizer state tensor compared across ranks
=============  ==================================================================  ===========

Probe checks replay the current batch on the live model inside
:func:`~onthefly.health.preserve.preserved`, which restores the model, gradients,
optimizers, modes and random state exactly: training afterwards is bit-identical.
"""

from onthefly.health.activations import check_activations
from onthefly.health.determinism import check_determinism
from onthefly.health.findings import Finding, finding, problems
from onthefly.health.gradients import check_gradients
from onthefly.health.instability import AmpCounts, StepHistory, check_instability
from onthefly.health.probe import Probe, build_probe, probing
from onthefly.health.throughput import ObservedTiming, check_throughput

__all__ = [
    "AmpCounts",
    "Finding",
    "ObservedTiming",
    "Probe",
    "StepHistory",
    "build_probe",
    "check_activations",
    "check_determinism",
    "check_gradients",
    "check_instability",
    "check_throughput",
    "finding",
    "probing",
    "problems",
]
