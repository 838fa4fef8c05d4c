"""HealthMonitor: the ``health`` command — run one health check at a batch boundary.

The command (argument ``check``: determinism, gradients, instability, activations,
throughput, distribution) runs on the training thread at the next boundary, or at once while
paused; the reply and a ``health_result`` event carry the findings (see
:mod:`onthefly.health`). ``distribution`` runs on every rank of a distributed run at the same
control round and compares them (:mod:`onthefly.health.distribution`).

Per step the monitor only keeps a reference to the current batch, two clock stamps and two
counters; the loss / gradient-norm / learning-rate history comes from the values Telemetry
already ships (``session.listen("metrics")``), so no host sync is added.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly import health
from onthefly.callbacks._runtime_sampler import StepClock
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.health.distribution import Control, check_distribution
from onthefly.protocol import HealthCheck, HealthOutcome, HealthResultBody

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

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
        history_steps: training steps kept for the instability check.
        clock: a step clock another part already stamps at every batch (``OnTheFly`` shares
            :attr:`Telemetry.clock`); ``None``: the monitor keeps and stamps its own.

    Example:
        >>> from onthefly.callbacks.session import RunSession
        >>> monitor = HealthMonitor(RunSession("demo"))  # usually created by ``OnTheFly``
    """

    def __init__(
        self, session: RunSession, history_steps: int = 2000, clock: StepClock | None = None
    ) -> None:
        self.session = session
        self.history = health.StepHistory(history_steps)
        self.results: dict[str, dict[str, Any]] = {}
        self._stamps = clock is None  # a shared clock is stamped by its owner
        self._clock = StepClock() if clock is None else clock
        self._batch: Any = None
        self._batch_idx = 0
        self._attempted = 0
        self._taken = 0
        self._handles: list[RemovableHandle] = []
        session.commands.register("health", self._on_command)
        session.listen("metrics", self.history.record)
        if self._stamps:
            session.on_quiet(self._clock.forget_gap)

    # ------------------------------------------------------------------ hooks

    def hook_implementations(self, hook: str) -> list[Callable[..., Any]] | None:
        """What a trainer that asks (the native one; :class:`OnTheFly` for Lightning) calls of
        ``hook``: with a shared clock, stamped by its owner, nothing at a batch's end or a
        validation's start. ``None``: the hook itself."""
        if not self._stamps and hook in ("on_train_batch_end", "on_validation_start"):
            return []
        return None

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._handles = [
            optimizer.register_step_post_hook(self._count_taken) for optimizer in trainer.optimizers
        ]

    def on_train_batch_start(
        self, trainer: TrainerHost, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._stamps:
            self._clock.batch_started(batch)
        self._batch, self._batch_idx = batch, batch_idx

    def on_before_optimizer_step(
        self, trainer: TrainerHost, pl_module: Any, optimizer: Any
    ) -> None:
        self._attempted += 1

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._stamps:
            self._clock.batch_ended()

    def on_validation_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if self._stamps:
            self._clock.forget_gap()

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._release()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._release()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._release()

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
        if check == "instability":
            counts = health.AmpCounts(self._attempted, self._taken)
            return health.check_instability(self.history.records(), counts)
        if check == "distribution":
            return self._distribution(boundary)
        trainer = boundary.trainer
        probe = health.build_probe(trainer, boundary.module, self._batch, self._batch_idx)
        if check == "throughput":
            clock = self._clock
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
        cursor = ranks.cursor(trainer, self._batch_idx + 1)
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

    def _count_taken(self, *args: Any) -> None:
        self._taken += 1

    def _release(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._batch = None
