"""Telemetry: what a run reports while it trains.

As training starts: the run's configuration (``config``: optimizer, its hyperparameters,
batch size, limits, model size, the module's hyperparameters). Per optimizer step: the loss,
each param group's learning rate (``lr``, ``lr/group1``, …; ``lr/opt1`` for a second
optimizer), the gradient norm (``grad_norm``) and every value the user logs. Per evaluation:
the validation and test results. Plus epoch boundaries, runtime stats (a background thread,
about once a second) and the run's log records and warnings.

No host sync is added per step: step values stay device tensors in a
:class:`~onthefly.callbacks._step_buffer.StepBuffer` that ships them in batches, and the
gradient norm is one fused ``_foreach_norm`` on the device (the buffer reduces the
per-parameter norms of many steps at once when it ships them). That norm is taken at every
optimizer step that starts at least ``grad_norm_every_s`` (10 ms) of training after the last
one taken: on real models every step, on a model whose steps take a millisecond about one in
ten, since a norm costs tens of microseconds there (its kernels' code no longer cached in a
step). A trainer that clips hands over the norm it computed anyway, at every step.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Iterator
from typing import Any

import torch
from lightning.pytorch import Callback

from onthefly.callbacks._log_forwarder import LogForwarder
from onthefly.callbacks._run_config import describe_run
from onthefly.callbacks._runtime_sampler import RuntimeSampler, StepClock
from onthefly.callbacks._step_buffer import Norms, Row, StepBuffer, Value
from onthefly.callbacks.session import RunSession
from onthefly.drivers import Driver, driver
from onthefly.drivers.base import TrainerHost
from onthefly.drivers.values import Scalar, host_floats, scalar_or_none
from onthefly.errors import ConfigurationError
from onthefly.protocol import METRICS_BODIES, EpochBody, MetricsBody, RunConfigBody, Split

log = logging.getLogger(__name__)

GRAD_NORM_EVERY_S = 0.01
"""The least training time between two steps whose gradient norm is taken (at most 100 a
second; every step of 10 ms or more)."""


class Telemetry(Callback):
    """Streams a run's metrics, runtime stats and logs to its session.

    Args:
        session: the run's shared session.
        log_level: the lowest level of log records forwarded (records must also pass the
            level of the logger that emits them).
        flush_every_steps: ship buffered step values after this many steps …
        flush_every_s: … or after this many seconds, whichever comes first.
        runtime_interval_s: seconds between two runtime samples.
        grad_norm_every_s: the least training time between two steps whose gradient norm is
            taken (see the module docstring); ``0`` takes it at every step.

    Example:
        >>> telemetry = Telemetry(RunSession("demo"))  # usually created by ``OnTheFly``
    """

    def __init__(
        self,
        session: RunSession,
        log_level: int | str = "INFO",
        flush_every_steps: int = 32,
        flush_every_s: float = 0.1,
        runtime_interval_s: float = 1.0,
        grad_norm_every_s: float = GRAD_NORM_EVERY_S,
    ) -> None:
        every = grad_norm_every_s
        if isinstance(every, bool) or not isinstance(every, int | float) or not every >= 0:
            raise ConfigurationError(
                f"grad_norm_every_s={every!r}; expected a number of seconds >= 0 (0: every step)"
            )
        self.session = session
        self._norm_every_s = float(every)
        self._buffer = StepBuffer(self._ship, flush_every_steps, flush_every_s)
        self._clock = StepClock()
        self._runtime_interval_s = runtime_interval_s
        self._sampler: RuntimeSampler | None = None
        self._logs = LogForwarder(session.publish, log_level)
        self._optimizer_values: dict[str, Value] = {}
        self._readers: dict[int, _OptimizerReader] = {}
        self._reader: _OptimizerReader | None = None  # the last one read (usually the only one)
        self._trainer_norm = False  # the native trainer clips, so it computes the norm itself
        self._norm_taken = False  # this step's own norm was due (see _record_step)
        self._losses: list[torch.Tensor] = []
        self._last_step: int | None = None
        self._eval_before: dict[str, int] = {}
        self._epoch_before: dict[str, int] = {}
        self._step_names: set[str] = {"loss"}
        self._failed: set[str] = set()
        self._driver: Driver | None = None
        session.on_quiet(self._quiet)

    @property
    def clock(self) -> StepClock:
        """Step and data-wait timing, stamped at every training batch (other parts may read it)."""
        return self._clock

    # ------------------------------------------------------------------ lifecycle

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not self.session.active:
            return
        self._last_step = trainer.global_step
        self._driver = driver(trainer)  # asked at every step: once per fit is enough
        self._readers, self._reader = {}, None
        self._trainer_norm = False
        self._logs.install()
        self._sampler = RuntimeSampler(
            self._clock,
            lambda: int(trainer.global_step),
            self.session.publish,
            self._runtime_interval_s,
        )
        self._sampler.start()

    def on_train_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if self.session.active:
            with self._guarded("describe the run's configuration"):
                self.session.publish(RunConfigBody(values=describe_run(trainer, pl_module)))

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()
        self._stop()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._stop()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    # ------------------------------------------------------------------ training

    def on_train_epoch_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not self.session.active:
            return
        self._epoch_before = driver(trainer).metric_snapshot()
        self.session.publish(
            EpochBody(epoch=int(trainer.current_epoch), step=int(trainer.global_step) + 1)
        )

    def on_train_batch_start(
        self, trainer: TrainerHost, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        self._clock.batch_started(batch)

    def on_before_optimizer_step(
        self, trainer: TrainerHost, pl_module: Any, optimizer: Any
    ) -> None:
        if not self.session.active:
            return
        # try/except rather than _guarded: this runs at every step (no generator to create).
        try:
            # The last reader, if still current (_OptimizerReader.current, inlined).
            reader, groups = self._reader, optimizer.param_groups
            if reader is None or reader.groups is not groups or reader.size != len(groups):
                reader = self._reader = self._reader_of(trainer, optimizer)
            # A native trainer that clips computes the norm anyway: reuse it (_record_step).
            due = not self._trainer_norm and reader.norm_due(
                self._clock.batch_start, self._norm_every_s
            )
            reader.read(self._optimizer_values, with_norm=due)
            self._norm_taken = due
        except Exception:
            self._warn_once("read the optimizer")

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        self._clock.batch_ended()
        if not self.session.active:
            return
        usual = type(outputs) is dict  # first: no call in the usual case
        loss = outputs.get("loss") if usual or isinstance(outputs, dict) else outputs
        if isinstance(loss, torch.Tensor) and (loss.ndim == 0 or loss.numel() == 1):
            # Both trainers hand over a detached loss already: no new tensor for it each step.
            self._losses.append(loss.detach() if loss.requires_grad else loss)
        if trainer.global_step != self._last_step:  # an optimizer step happened
            try:
                self._record_step(trainer, outputs)
            except Exception:
                self._warn_once("record a step")

    def on_train_epoch_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()
        if self.session.active:
            with self._guarded("report epoch values"):
                values = driver(trainer).epoch_values(self._epoch_before, self._step_names)
                if values:
                    self._publish_values(trainer, "train", values)

    # ------------------------------------------------------------------ evaluation

    def on_validation_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_started(trainer)

    def on_validation_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._eval_ended(trainer, "val")

    def on_test_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_started(trainer)

    def on_test_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_ended(trainer, "test")

    # ------------------------------------------------------------------ helpers

    def flush(self) -> None:
        """Ship every buffered step now (pause, test, evaluation, epoch and run end)."""
        with self._guarded("ship step values"):
            self._buffer.flush()

    def _quiet(self) -> None:
        # The run stops stepping (pause, test, end): ship the tail, and do not count the
        # time until the next batch as waiting for data.
        self.flush()
        self._clock.forget_gap()

    @contextlib.contextmanager
    def _guarded(self, action: str) -> Iterator[None]:
        try:
            yield
        except Exception:
            self._warn_once(action)

    def _warn_once(self, action: str) -> None:
        # Telemetry is an aid: what it cannot read or send is reported once, never raised.
        # Called from an ``except`` block, so the warning carries the exception.
        if action not in self._failed:
            self._failed.add(action)
            log.warning("OnTheFly could not %s; training goes on", action, exc_info=True)

    def _record_step(self, trainer: TrainerHost, outputs: Any) -> None:
        values, self._optimizer_values = self._optimizer_values, {}
        step_driver = self._driver or driver(trainer)
        logged = step_driver.step_values(outputs)
        if logged:
            self._step_names.update(logged)
            for name, value in logged.items():
                values.setdefault(name, value)  # the optimizer's own names win
        # Whether the trainer clips (and so has a norm) is first seen at a step whose own
        # norm was due, the first one included: other steps need not ask.
        norm = step_driver.grad_norm() if self._trainer_norm or self._norm_taken else None
        if norm is not None:  # the same quantity as ours (total norm before clipping)
            values["grad_norm"] = norm
            self._trainer_norm = True
        losses = self._losses
        if losses:
            divided = step_driver.accumulation()
            # The usual step, one loss as it is, without a call to _step_loss.
            usual = divided == 1 and len(losses) == 1
            values["loss"] = losses[0] if usual else _step_loss(losses, divided)
            self._losses = []
        step = trainer.global_step
        # The batch's start stamp is recent enough for the buffer's every-0.1-s check.
        self._buffer.add(int(step), int(trainer.current_epoch), values, self._clock.batch_start)
        self._last_step = step

    def _reader_of(self, trainer: TrainerHost, optimizer: Any) -> _OptimizerReader:
        """The reader of ``optimizer`` (a new one when its param groups changed)."""
        reader = self._readers.get(id(optimizer))
        if reader is None or not reader.current(optimizer):
            reader = self._readers[id(optimizer)] = _OptimizerReader(trainer, optimizer)
        return reader

    def _ship(self, rows: list[Row]) -> None:
        # One validation and one publication for the batch: this runs on the training thread.
        bodies = [
            {"split": "train", "step": step, "epoch": epoch, "values": values}
            for step, epoch, values in rows
        ]
        self.session.publish_all(METRICS_BODIES.validate_python(bodies))

    def _eval_started(self, trainer: TrainerHost) -> None:
        self._clock.forget_gap()
        if self.session.active:
            self.flush()  # the training steps before it come first in the stream
            self._eval_before = driver(trainer).metric_snapshot()

    def _eval_ended(self, trainer: TrainerHost, split: Split) -> None:
        if not self.session.active:
            return
        with self._guarded(f"report {split} results"):
            values = driver(trainer).eval_values(self._eval_before)
            self._publish_values(trainer, split, without_split_prefix(values, split))

    def _publish_values(
        self, trainer: TrainerHost, split: Split, values: dict[str, Scalar]
    ) -> None:
        self.session.publish(
            MetricsBody(
                split=split,
                step=int(trainer.global_step),
                epoch=int(trainer.current_epoch),
                values=host_floats(values),
            )
        )

    def _stop(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self._logs.uninstall()


class _OptimizerReader:
    """Reads one optimizer's learning rates and gradient norm at every step; the names and
    the flat parameter list are worked out once (again when param groups are added).

    Args:
        trainer: the trainer (its ``optimizers`` tell which optimizer this is).
        optimizer: a ``torch.optim.Optimizer`` (or anything with ``param_groups``).
    """

    def __init__(self, trainer: TrainerHost, optimizer: Any) -> None:
        optimizers = trainer.optimizers
        index = next((i for i, o in enumerate(optimizers) if o is optimizer), 0)
        prefix = "" if index == 0 else f"/opt{index}"
        self.groups = optimizer.param_groups
        self.size = len(self.groups)
        self.lr_names = [f"lr{prefix}/group{j}" if j else f"lr{prefix}" for j in range(self.size)]
        self.norm_name = f"grad_norm{prefix}"
        self.params = [p for group in self.groups for p in group["params"]]
        self._norm_at = -math.inf

    def norm_due(self, started: float | None, every_s: float) -> bool:
        """Whether the step whose batch started at ``started`` takes the gradient norm (then
        the next one is due ``every_s`` later)."""
        if started is not None and started - self._norm_at < every_s:
            return False
        self._norm_at = -math.inf if started is None else started
        return True

    def current(self, optimizer: Any) -> bool:
        """Whether ``optimizer``'s param groups are still the ones read at creation."""
        groups = optimizer.param_groups
        return groups is self.groups and len(groups) == self.size

    def read(self, values: dict[str, Value], with_norm: bool) -> None:
        """Put the learning rates (and the gradient norm's parts) into ``values``."""
        for name, group in zip(self.lr_names, self.groups, strict=True):
            lr = group.get("lr")
            lr = lr if type(lr) is float else scalar_or_none(lr)
            if lr is not None:
                values[name] = lr
        if with_norm:
            norms = grad_norms(self.params)
            if norms is not None:
                values[self.norm_name] = norms


def without_split_prefix(values: dict[str, Any], split: str) -> dict[str, Any]:
    """Evaluation results named without their split: ``val_loss`` and ``val/loss`` -> ``loss``.

    Results are published with ``split="val"`` (or ``"test"``) and shown as ``val/<name>``;
    the prefix users and the native trainer put in the name would otherwise show twice
    (``val/val_loss``). A name that is only the prefix, or whose bare form is logged as well,
    is kept as it is.

    Args:
        values: the results, by the name they were logged under.
        split: ``"val"`` or ``"test"``.

    Example:
        >>> without_split_prefix({"val_loss": 0.5, "val/acc": 0.9, "f1": 0.7}, "val")
        {'loss': 0.5, 'acc': 0.9, 'f1': 0.7}
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        bare = name
        for prefix in (f"{split}_", f"{split}/"):
            if name.startswith(prefix) and len(name) > len(prefix):
                bare = name[len(prefix) :]
                break
        if bare != name and (bare in values or bare in out):
            bare = name  # both spellings logged: keep them apart
        out[bare] = value
    return out


def grad_norms(parameters: Any) -> Norms | None:
    """The L2 norm of each parameter's gradient, as device tensors (no host sync): one fused
    ``torch._foreach_norm``. Their global norm is taken when the step ships
    (:class:`~onthefly.callbacks._step_buffer.StepBuffer`)."""
    grads = [g for g in [p.grad for p in parameters] if g is not None and not g.is_sparse]
    if not grads:
        return None
    return Norms(torch._foreach_norm(grads))


def _step_loss(losses: list[torch.Tensor], divided: int) -> torch.Tensor:
    """The mean micro-batch loss of one optimizer step's window, from the losses as reported
    (each divided by ``divided``); a short last window is averaged over its own length.
    (The usual step, one loss not divided, is that loss itself: the caller takes it.)"""
    stacked = torch.stack([loss.reshape(()) for loss in losses])
    if divided == 1:
        return stacked.mean()
    total = stacked.sum()
    return total if len(losses) == divided else total * (divided / len(losses))
