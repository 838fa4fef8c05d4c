"""Watchdog: raise an ``alert`` when a run goes wrong, while it trains.

What it watches, and where the values come from (never a tensor: no host sync is added):

* a NaN or infinite training loss or gradient norm, and loss spikes: the host floats
  :class:`~onthefly.callbacks.telemetry.Telemetry` ships in batches, read as they are
  published (:meth:`RunSession.listen`);
* a stalled run: a background thread looks at the step counter of the run's
  :class:`~onthefly.callbacks._runtime_sampler.StepClock` about once a second; time paused,
  testing, validating or running a command never counts;
* a data loader that raised (or whose worker died) and any other exception that ends the
  run: ``on_exception``, before the session closes.

Each alert is published as an ``alert`` event (``raised``, later ``cleared``); the run's
state in the dashboard, ``onthefly status`` and VS Code's status bar shows the ones raised.
The rules themselves are in :mod:`onthefly.callbacks._alert_rules`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from lightning.pytorch import Callback

from onthefly import environment
from onthefly.callbacks._alert_rules import LossSpikes, NonFinite, Stalls, Verdict
from onthefly.callbacks._runtime_sampler import StepClock
from onthefly.callbacks._step_buffer import Steps
from onthefly.callbacks.session import RunSession
from onthefly.drivers.base import TrainerHost
from onthefly.protocol import AlertBody, AlertKind, Severity

log = logging.getLogger(__name__)

STALL_ENV = "ONTHEFLY_STALL_SECONDS"
"""The shortest time without a step that is a stall, in seconds (default 30)."""

DEFAULT_STALL_SECONDS = 30.0

_LOADER_FRAMES = ("/torch/utils/data/",)
_MAX_MESSAGE = 300


class Watchdog(Callback):
    """Publishes an ``alert`` for non-finite values, loss spikes, stalls and crashes.

    Args:
        session: the run's shared session.
        clock: the step stamps of the training thread (Telemetry's).
        stall_seconds: the shortest stall; ``None`` reads ``ONTHEFLY_STALL_SECONDS`` (30).
        spikes: the loss-spike rule (its defaults suit most runs).

    Example:
        >>> watchdog = Watchdog(RunSession("demo"), StepClock())  # usually made by ``OnTheFly``
    """

    def __init__(
        self,
        session: RunSession,
        clock: StepClock,
        stall_seconds: float | None = None,
        spikes: LossSpikes | None = None,
    ) -> None:
        self.session = session
        self._clock = clock
        self._stall_seconds = stall_seconds
        self._spikes = spikes or LossSpikes()
        self._loss = NonFinite(
            "training loss",
            "look at the learning rate, the batch of that step and the loss's inputs "
            "(a log of 0, a division by 0), or clip gradients",
        )
        self._norms: dict[str, NonFinite] = {}
        self._evaluating = False
        self._step: Callable[[], int] = lambda: 0
        self._thread: threading.Thread | None = None
        self._stalls: Stalls | None = None
        self._stop = threading.Event()
        session.listen("metrics", self._on_metrics)

    # ------------------------------------------------------------------ lifecycle

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not self.session.active or self._thread is not None:
            return
        self._step = lambda: int(trainer.global_step)
        self._stalls = Stalls(min_seconds=stall_seconds(self._stall_seconds))
        self._stop.clear()
        self._thread = threading.Thread(target=self._watch, name="onthefly-watchdog", daemon=True)
        self._thread.start()

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._halt()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._halt()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._halt()
        if not self.session.active or not isinstance(exception, Exception):
            return  # Ctrl+C and SystemExit end a run on purpose
        loader = from_data_loading(exception)
        what = f"{type(exception).__name__}: {_first_line(exception)}"
        if loader:
            message = f"a data loader failed and ended the run: {what}"
        else:
            message = f"the run ended with {what}"
        details = {"exception": type(exception).__name__, "text": _first_line(exception)}
        kind: AlertKind = "loader_crashed" if loader else "crashed"
        self._publish(kind, "error", Verdict("raised", message, details), int(trainer.global_step))

    # ------------------------------------------------------------------ evaluation

    def on_validation_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._evaluating = True

    def on_validation_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._evaluating = False

    def on_test_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._evaluating = True

    def on_test_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._evaluating = False

    # ------------------------------------------------------------------ values

    def observe_steps(self, steps: Steps) -> None:
        """Telemetry's shipped training steps: each rule looks at its column at once, which
        costs a few calls per batch of steps rather than per step (on the training thread)."""
        for name, column in steps.values.items():
            if name == "loss" or name.startswith("grad_norm"):
                self._check(name, *_present(steps.step, column))

    def _on_metrics(self, payloads: list[dict[str, Any]]) -> None:
        # The other published training values (an epoch's, the shipped steps come to
        # observe_steps), looked at the same way.
        rows = [(p["step"], p["values"]) for p in payloads if p["split"] == "train"]
        for name in dict.fromkeys([name for _, values in rows for name in values]):
            if name == "loss" or name.startswith("grad_norm"):
                self._check(name, *_column(rows, name))

    def _check(self, name: str, steps: list[int], values: list[float]) -> None:
        if name == "loss":
            loss, spikes = self._loss, self._spikes
            self._publish_all("nonfinite_loss", "error", loss.observe_all(steps, values))
            self._publish_all("loss_spike", "warning", spikes.observe_all(steps, values))
        else:
            rule = self._norms.get(name) or self._norm_rule(name)
            self._publish_all("nonfinite_grad", "error", rule.observe_all(steps, values))

    def _publish_all(
        self, kind: AlertKind, severity: Severity, verdicts: list[tuple[int, Verdict]]
    ) -> None:
        for step, verdict in verdicts:  # a verdict is rare: most batches have none
            self._publish(kind, severity, verdict, step)

    def _norm_rule(self, name: str) -> NonFinite:
        rule = self._norms[name] = NonFinite(
            f"gradient norm ({name})",
            "an overflow in the backward pass: lower the learning rate, clip gradients, or use "
            "a loss scaler with mixed precision",
        )
        return rule

    # ------------------------------------------------------------------ stalls

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            try:
                self._look()
            except Exception:  # the watchdog is an aid: it must never end the run
                log.warning("OnTheFly's stall watchdog stopped", exc_info=True)
                return

    def _look(self) -> None:
        rule = self._stalls
        if rule is None:
            return
        training = (
            self.session.state == "running"
            and not self._evaluating
            and not self.session.commands.running
        )
        verdict = rule.tick(time.monotonic(), self._clock.steps, training)
        if verdict is not None:
            self._publish("stalled", "warning", verdict, self._step())

    def _halt(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join(timeout=2.0)
        # A last look: a stall that ended since the previous one is cleared, not left raised.
        with contextlib.suppress(Exception):
            self._look()
        self._stalls = None

    def _publish(self, kind: AlertKind, severity: Severity, verdict: Verdict, step: int) -> None:
        self.session.publish(
            AlertBody(
                kind=kind,
                state=verdict.state,
                severity=severity,
                step=step,
                message=verdict.message,
                details=verdict.details,
            )
        )


def stall_seconds(given: float | None) -> float:
    """The shortest stall: ``given``, else ``ONTHEFLY_STALL_SECONDS``, else 30 s."""
    if given is not None:
        return given
    return environment.positive_seconds(STALL_ENV, DEFAULT_STALL_SECONDS)


def from_data_loading(exception: BaseException) -> bool:
    """Whether ``exception`` was raised while a ``torch.utils.data`` loader fetched a batch
    (by the dataset, the collate function, or a worker that died)."""
    frames = traceback.extract_tb(exception.__traceback__)
    return any(
        marker in frame.filename.replace("\\", "/") for frame in frames for marker in _LOADER_FRAMES
    )


def _column(rows: list[tuple[int, dict[str, Any]]], name: str) -> tuple[list[int], list[float]]:
    """The steps that have a float ``name``, and its values."""
    pairs = [(step, values[name]) for step, values in rows if name in values]
    pairs = [(step, value) for step, value in pairs if type(value) is float]
    return [step for step, _ in pairs], [value for _, value in pairs]


def _present(steps: list[int], column: list[Any]) -> tuple[list[int], list[float]]:
    """The steps that have a value in ``column`` (host floats, ``None`` where absent)."""
    if None not in column:
        return steps, column
    pairs = [(step, value) for step, value in zip(steps, column, strict=True) if value is not None]
    return [step for step, _ in pairs], [value for _, value in pairs]


def _first_line(exception: BaseException) -> str:
    text = str(exception).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 1] + "…"
