"""HealthMonitor: the ``health`` command — run one health check at a batch boundary.

The command (argument ``check``: determinism, gradients, instability, activations,
throughput, distribution) runs on the training thread at the next boundary, or at once while
paused; the reply and a ``health_result`` event carry the findings (see
:mod:`onthefly.health`). ``distribution`` runs on every rank of a distributed run at the same
control round and compares them (:mod:`onthefly.health.distribution`).

The monitor has no hook at a training step: the run's
:class:`~onthefly.callbacks._recorder.Recorder` keeps the batch in progress (the probes'
batch), the step clock and, under a grad scaler, the steps attempted and taken; the loss /
gradient-norm / learning-rate history comes from the values Telemetry already ships
(:meth:`HealthMonitor.observe_steps`), so no host sync is added.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly import health
from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks._step_buffer import Steps
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.errors import ConfigurationError
from onthefly.health.distribution import Control, check_distribution
from onthefly.protocol import HealthCheck, HealthOutcome, HealthResultBody

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

_PROBE_CHECKS = {
    "determinism": health.check_determinism,
    "gradients": health.check_gradients,
    "activations": health.check_activations,
}


class HealthMonitor(Callback):
    """Runs health checks on demand (``health`` command) and keeps what they need.

    Args:
        session: the run's shared session (the command is registered on it).
        recorder: the run's per-batch recorder (batch in progress, step clock, AMP counts).
        history_steps: training steps kept for the instability check.

    Example:
        >>> session = RunSession("demo")  # usually created by ``OnTheFly``
        >>> monitor = HealthMonitor(session, Recorder(session, StepClock()))
    """

    def __init__(self, session: RunSession, recorder: Recorder, history_steps: int = 2000) -> None:
        self.session = session
        self.history = health.StepHistory(history_steps)
        self.results: dict[str, dict[str, Any]] = {}
        self._recorder = recorder
        session.commands.register("health", self._on_command)

    def observe_steps(self, steps: Steps) -> None:
        """Telemetry's shipped training steps: kept for the instability check."""
        self.history.record_columns(steps.step, steps.values)

    def state_dict(self) -> dict[str, Any]:
        return {"results": dict(self.results), "history": self.history.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.results = dict(state_dict.get("results", {}))
        self.history.load_state_dict(state_dict.get("history", {}))

    # ------------------------------------------------------------------ the check

    def run(self, boundary: Boundary, check: HealthCheck) -> dict[str, Any]:
        """Run ``check`` now and publish its ``health_result``.

        Args:
            boundary: the trainer and module, at a batch boundary.
            check: which check.

        Returns:
            The published fields: check, step, findings (as dicts), duration.

        Raises:
            ConfigurationError: the run cannot be probed (see
                :func:`onthefly.health.build_probe`).
        """
        self.session.quiesce()  # Telemetry ships its tail: the history is up to date
        started = time.perf_counter()
        findings = self._findings(boundary, check)
        result: dict[str, Any] = {
            "check": check,
            "step": int(boundary.trainer.global_step),
            "findings": [f.model_dump() for f in findings],
            "duration": time.perf_counter() - started,
        }
        self.results[check] = result
        self.session.publish(HealthResultBody(**result))
        return result

    def _findings(self, boundary: Boundary, check: HealthCheck) -> list[health.Finding]:
        recorder = self._recorder
        if check == "instability":
            counts = health.AmpCounts(recorder.attempted, recorder.taken)
            return health.check_instability(self.history.records(), counts)
        if check == "distribution":
            return self._distribution(boundary)
        trainer = boundary.trainer
        probe = health.build_probe(trainer, boundary.module, recorder.batch, recorder.batch_idx)
        if check == "throughput":
            clock = recorder.clock
            timing = health.ObservedTiming(
                clock.steps, clock.step_time_total, clock.data_wait_total
            )
            return health.check_throughput(probe, timing)
        return _PROBE_CHECKS[check](probe)

    def _distribution(self, boundary: Boundary) -> list[health.Finding]:
        ranks = self.session.ranks
        if ranks.group is None:  # "run all" includes it: a note, not an error
            summary = "a single process: there are no ranks to compare"
            return [health.finding("distribution", "info", summary, world_size=1)]
        trainer = boundary.trainer
        cursor = ranks.cursor(trainer, self._recorder.batch_idx + 1)
        optimizers = list(trainer.optimizers)
        control = Control(ranks.interval, ranks.round_cost_s)
        return check_distribution(boundary.module, optimizers, ranks.group, cursor, control)

    def _on_command(self, boundary: Boundary, cmd: PendingCommand) -> None:
        check: HealthCheck = cmd.command.check  # type: ignore[union-attr]
        try:
            result = self.run(boundary, check)
        except ConfigurationError as exc:
            cmd.fail("unsupported", f"the {check} check cannot run: {exc}")
            return
        cmd.reply(HealthOutcome(**result))
